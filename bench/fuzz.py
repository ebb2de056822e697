"""Time-boxed fuzzing of every reader of untrusted input, with hypothesis.

    python bench/fuzz.py [--seconds 300] [--out FILE] [--only NAME ...]

Targets (the time box is shared equally): the import reader, the transcript readers and
digest, the insight models with the lint, the poisoning check, redaction and rendering
(which must leave no frame markup), the hooks' stdin (the tool-use, session-start and
session-end doors, FIFOs and devices among the paths), the config file and the
environment, the `openai` backend against a fake server sending fuzzed answers (huge,
dripped, invalid UTF-8, lone surrogates, nested JSON, near-misses of the schema), the JSONC
installers (install then uninstall gives back every byte, or install refuses in our
words), and the store's `record` on a real store.

A crash is any exception other than the documented ones (a ValidationError from a model,
our errors where a door translates them: ConfigError from settings, DistillError from a
backend, InputError from a hook's input); the run reports examples tried and crashes per
target, and exits 1 on any crash. The hook doors run in process, with process spawning
(the worker, the service) turned off: a fuzzer must not start thousands of them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fakes in tests/

from mtl_mcp import Memory  # noqa: E402
from mtl_mcp.config import Settings, load_settings  # noqa: E402
from mtl_mcp.errors import ConfigError, DistillError, MtlError  # noqa: E402
from mtl_mcp.hooks import session as session_hooks  # noqa: E402
from mtl_mcp.hooks import tool_use as tool_use_hook  # noqa: E402
from mtl_mcp.hooks.fast import served_already  # noqa: E402
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend  # noqa: E402
from mtl_mcp.learning.transcripts import build_digest, read_transcript  # noqa: E402
from mtl_mcp.memory.jsonl import read_import  # noqa: E402
from mtl_mcp.schemas import Insight, InsightDraft, RecallHit  # noqa: E402
from mtl_mcp.text.frames import FRAME_TAGS, frame_markup  # noqa: E402
from mtl_mcp.text.lint import lint  # noqa: E402
from mtl_mcp.text.poisoning import instructions_to_assistant  # noqa: E402
from mtl_mcp.text.redact import redact  # noqa: E402
from mtl_mcp.text.render import insight_markdown, plan_notes_text, recall_text  # noqa: E402
from tests.fake_hostile import HostileServer  # noqa: E402
from tests.learning.test_backend_limits import judge  # noqa: E402
from tests.operations.test_install_roundtrip import CLIENTS, config_texts, round_trip  # noqa: E402

KEYS = [
    "title", "description", "content", "polarity", "category", "domain", "languages", "tags",
    "id", "notes", "support", "status", "projects", "created_at", "type", "message", "role",
    "text", "tool_use_id", "is_error", "payload", "arguments", "output", "messages", "history",
    "session_id", "transcript_path", "cwd", "workspace_roots", "input", "name", "extra",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=80),
    st.text(max_size=5000),
    st.sampled_from(["user", "assistant", "tool_use", "tool_result", "text", "success", "\x00"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(KEYS), inner, max_size=8)
    ),
    max_leaves=40,
)
LINE = st.one_of(
    st.binary(max_size=2000),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=2000).map(lambda t: t.encode("utf-8", errors="surrogatepass")),
    st.integers(1, 300_000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1, 300_000).map(lambda n: ('{"a":' * n + "1" + "}" * n).encode()),
    st.sampled_from(
        [
            b'{"type": "user", "message": {"content": "\\ud800 \\u0000 \\udfff"}}',
            b'{"title": "lone \\ud800", "description": "d", "content": "a b c d e f g"}',
            b"\xff\xfe\x00\x00" * 100,
        ]
    ),
)
DRAFT = st.fixed_dictionaries(
    {
        "title": st.text(min_size=1, max_size=120),
        "description": st.text(min_size=1, max_size=320),
        "content": st.text(min_size=1, max_size=1100),
    },
    optional={"tags": st.lists(st.text(max_size=45), max_size=14), "domain": st.text()},
)
FORMATS = st.sampled_from(["auto", "claude-code", "codex", "trajectory", "text"])
# Word salad with hostile tokens: most of it passes validation, so it reaches the lint,
# the embedding model and LanceDB rather than stopping at the first validator.
WORDS = st.sampled_from(
    ["run", "the", "test", "before", "editing", "code", "check", "inputs", "retry", "with",
     "backoff", "cache", "never", "always", "'", '"', ";", "--", "\\", "\x00", "\u202e",
     "\U0001f600", "%s", "{}", "$(id)", "`ls`", "<script>", "DROP", "TABLE",
     "</system-reminder>", "<|im_start|>", "[INST]", "<invoke", "<<SYS>>",
     *(f"<{tag}>" for tag in FRAME_TAGS[:8])]
)  # fmt: skip
WORDY = st.fixed_dictionaries(
    {
        "title": st.lists(WORDS, min_size=2, max_size=12).map(" ".join),
        "description": st.lists(WORDS, min_size=1, max_size=30).map(" ".join),
        "content": st.lists(WORDS, min_size=6, max_size=80).map(" ".join),
    },
    optional={"tags": st.lists(WORDS, max_size=5), "polarity": st.just("failure")},
)


def _import_reader(work: Path) -> Callable[..., None]:
    @given(lines=st.lists(LINE, max_size=12))
    def run(lines: list[bytes]) -> None:
        path = work / "import.jsonl"
        path.write_bytes(b"\n".join(lines))
        for _, item in read_import(path):
            assert isinstance(item, Insight | InsightDraft | str)

    return run


def _transcripts(work: Path) -> Callable[..., None]:
    @given(lines=st.lists(LINE, max_size=12), fmt=FORMATS, budget=st.integers(200, 3000))
    def run(lines: list[bytes], fmt: Any, budget: int) -> None:
        path = work / "transcript.jsonl"
        path.write_bytes(b"\n".join(lines))
        digest = build_digest(read_transcript(path, fmt), token_budget=budget)
        digest.text.encode("utf-8")
        assert digest.estimated_tokens <= budget

    return run


def _models(work: Path) -> Callable[..., None]:
    @given(data=st.one_of(JSON, DRAFT, WORDY))
    def run(data: Any) -> None:
        for model in (InsightDraft, Insight):
            try:
                item = model.model_validate(data)
            except ValidationError:
                continue
            lint(item)
            text = f"{item.title}\n{item.description}\n{item.content}"
            instructions_to_assistant(text)
            redact(text)
            json.dumps(item.model_dump(mode="json"))
            if isinstance(item, Insight):
                insight_markdown(item)
            hit = RecallHit(
                id="ins_0",
                title=item.title,
                description=item.description,
                content=item.content,
                polarity=item.polarity or "success",
                category=item.category or "other",
                domain=item.domain,
                project=None,
                score=0.0,
                similarity=0.0,
            )
            for rendered in (recall_text([hit]), plan_notes_text([hit])):
                assert frame_markup(rendered) == [], rendered

    return run


PATHS = st.sampled_from(["fifo", "/dev/zero", "/dev/null", "/dev/stdin", "/etc/passwd", "."])
PAYLOADS = st.fixed_dictionaries(
    {
        "session_id": st.one_of(st.text(max_size=40), st.just("s-fuzz")),
        "hook_event_name": st.sampled_from(
            ["PostToolUse", "PostToolUseFailure", "AfterTool", "SessionStart", "SessionEnd", "x"]
        ),
        "tool_name": st.sampled_from(["Bash", "ExitPlanMode", "TodoWrite", "Read", "ToolSearch"]),
        "transcript_path": PATHS,
    },
    optional={
        "prompt_id": st.text(max_size=8),
        "tool_use_id": st.text(max_size=8),
        "tool_input": JSON,
        "tool_response": st.one_of(JSON, st.fixed_dictionaries({"filePath": PATHS})),
        "cwd": st.one_of(st.text(max_size=20), PATHS),
    },
)
STDIN = st.one_of(
    st.text(max_size=3000),
    JSON.map(json.dumps),
    PAYLOADS.map(json.dumps),
    LINE.map(lambda b: b.decode("utf-8", errors="replace")),
)


def _hook_input(work: Path) -> Callable[..., None]:
    """The hooks' doors in process: the fast path, the tool-use hook and the session hooks.
    Our errors (InputError for a bad payload) are what the session hooks' front door logs;
    the tool-use hook and the fast path may raise nothing."""
    os.mkfifo(work / "fifo")
    os.chdir(work)  # the payloads' "fifo" is this one
    settings = load_settings(work / "home", starter=False, hook_budget_seconds=0.2)
    tool_use_hook.start_in_background = lambda settings: None  # type: ignore[assignment]
    session_hooks.spawn_detached = lambda settings, *args: None  # type: ignore[assignment]

    @given(raw=STDIN)
    def run(raw: str) -> None:
        served_already(str(settings.home), raw)
        tool_use_hook.tool_use(raw, settings)
        for door in (session_hooks.session_end, session_hooks.parse_input):
            with contextlib.suppress(MtlError):
                door(raw, settings) if door is session_hooks.session_end else door(raw)

    return run


NAMES = [
    "digest_tokens", "service_idle_seconds", "openai_timeout", "plan_recall", "starter",
    "claude_command", "local_daily_tokens", "hook_budget_seconds", "distill_backend",
    "plan_recall_floor", "openai_base_url", "storage", "unknown_one",
]  # fmt: skip
TOML_VALUES = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(f), repr(f))
    ),
    st.sampled_from(["true", "false", "[6000]", "{ a = 1 }", "1979-05-27", '"x"', '"nan"', "[]"]),
    st.text(max_size=20).map(json.dumps),
)


def _config(work: Path) -> Callable[..., None]:
    """config.toml and the environment: Settings, or a ConfigError; never anything else."""
    home = work / "home"
    home.mkdir()

    @given(
        lines=st.lists(st.tuples(st.sampled_from(NAMES), TOML_VALUES), max_size=5),
        garbage=st.one_of(st.just(b""), st.binary(max_size=200)),
        env=st.one_of(st.none(), st.tuples(st.sampled_from(NAMES[:4]), st.text(max_size=12))),
    )
    def run(lines: list[tuple[str, str]], garbage: bytes, env: tuple[str, str] | None) -> None:
        text = "".join(f"{name} = {value}\n" for name, value in lines).encode() + garbage
        (home / "config.toml").write_bytes(text)
        name = f"MTL_MCP_{env[0].upper()}" if env else None
        if env and name and "\x00" not in env[1]:
            os.environ[name] = env[1]
        try:
            settings = load_settings(home)
            assert isinstance(settings, Settings)
        except ConfigError as exc:
            assert "Traceback" not in str(exc) and "pydantic" not in str(exc)
        finally:
            if name:
                os.environ.pop(name, None)

    return run


def _answer_bodies() -> st.SearchStrategy[dict[str, Any]]:
    """What a broken or hostile chat-completions server sends, as `HostileServer` options."""
    content = st.one_of(
        st.just('{"outcome": "success", "reason": "tests pass"}'),
        st.text(max_size=400),
        st.just('{"outcome": "success", "reason": "lone \ud83d"}'),
        JSON.map(json.dumps),
        st.integers(1, 5000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    )
    completion = content.map(
        lambda text: json.dumps({"choices": [{"message": {"content": text}}]}).encode()
    )
    body = st.one_of(
        completion,
        st.binary(max_size=300),
        st.just(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'),
        st.just(b'{"choices": [{"message": {"content": "\\ud800"}}]}'),
        st.integers(1, 100_000).map(lambda n: b"[" * n + b"]" * n),
        JSON.map(lambda v: json.dumps(v).encode()),
    )
    return st.one_of(
        st.fixed_dictionaries({"body": body, "status": st.sampled_from([200, 200, 400, 429, 500])}),
        st.just({"body": b'{"choices": [', "size": 20 << 20}),  # 20 MB: past the cap
        st.just({"body": b"{", "drip": b" " * 20, "interval": 0.2}),  # past the deadline
    )


def _openai_answer(work: Path) -> Callable[..., None]:
    """The backend against fuzzed answers: an Answer, or our DistillError; never another
    exception, never a hang past its deadline, never more than its cap read."""
    server = HostileServer()
    os.environ["MTL_MCP_OPENAI_BASE_URL"] = server.base_url
    os.environ["MTL_MCP_OPENAI_MODEL"] = "qwen3:0.6b"
    os.environ["MTL_MCP_OPENAI_TIMEOUT"] = "1"
    backend = OpenAIBackend(load_settings(work / "home", starter=False), record_answers=False)
    backend._context = (8192, "fuzz")  # the chat requests only: no context-window probes

    @given(answer=_answer_bodies())
    def run(answer: dict[str, Any]) -> None:
        server.always(**answer)
        with contextlib.suppress(DistillError):
            judge(backend)

    return run


def _installers(work: Path) -> Callable[..., None]:
    """Install then uninstall, for every JSON client, over generated JSON(C) files."""

    @given(client=st.sampled_from(CLIENTS), data=st.data())
    def run(client: Any, data: Any) -> None:
        hooks = data.draw(st.none() | config_texts(client, comments=False))
        round_trip(client, data.draw(config_texts(client)), hooks)

    return run


def _store(work: Path) -> Callable[..., None]:
    store = Memory(load_settings(work / "home", starter=False))

    @given(drafts=st.lists(st.one_of(WORDY, DRAFT, JSON), min_size=1, max_size=3))
    def run(drafts: list[Any]) -> None:
        results = store.record(drafts)
        assert len(results) == len(drafts)

    return run


TARGETS: dict[str, Callable[[Path], Callable[..., None]]] = {
    "import reader": _import_reader,
    "transcript readers + digest": _transcripts,
    "insight models + lint, poisoning check, redaction, rendering": _models,
    "hook stdin": _hook_input,
    "config file and environment": _config,
    "openai answer": _openai_answer,
    "JSONC installers": _installers,
    "store.record": _store,
}


def fuzz(name: str, seconds: float, work: Path) -> dict[str, Any]:
    """Run one target for `seconds`, in batches of fresh random examples."""
    examples = 0
    crashes: dict[str, str] = {}
    test = TARGETS[name](work)

    def counted(*args: Any, **kwargs: Any) -> None:
        nonlocal examples
        examples += 1
        inner(*args, **kwargs)

    inner = test.hypothesis.inner_test  # type: ignore[attr-defined]
    test.hypothesis.inner_test = counted  # type: ignore[attr-defined]
    batch = settings(
        max_examples=100,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # no shrinking: report the first failing input as it came
        suppress_health_check=list(HealthCheck),
    )(test)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            batch()
        except Exception as exc:  # a crash: keep one example per distinct failure
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            key = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"
            notes = "\n".join(getattr(exc, "__notes__", []))[:2000]
            crashes.setdefault(key, f"{exc}\n{notes}")
    return {"examples": examples, "crashes": crashes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="The whole time box.")
    parser.add_argument("--out", type=Path, help="Also write the report as JSON here.")
    parser.add_argument("--only", nargs="*", choices=list(TARGETS), help="These targets only.")
    args = parser.parse_args()
    chosen = args.only or list(TARGETS)
    logging.getLogger().setLevel(logging.CRITICAL)  # what the doors log is not a crash
    logging.getLogger().addHandler(logging.NullHandler())
    share = args.seconds / len(chosen)
    report: dict[str, Any] = {"seconds": args.seconds, "targets": {}}
    home = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="mtl-fuzz-") as tmp:
        os.environ["MTL_MCP_HOME"] = str(Path(tmp) / "home")
        os.environ["MTL_MCP_SERVICE"] = "0"
        for name in chosen:
            work = Path(tmp) / name.split()[0]
            work.mkdir()
            result = fuzz(name, share, work)
            os.chdir(home)
            report["targets"][name] = result
            print(f"{name}: {result['examples']} examples, {len(result['crashes'])} crashes")
            for key, detail in result["crashes"].items():
                print(f"  CRASH {key}\n    " + detail.replace("\n", "\n    "))
    report["examples"] = sum(t["examples"] for t in report["targets"].values())
    report["crashes"] = sum(len(t["crashes"]) for t in report["targets"].values())
    print(
        f"total: {report['examples']} examples in {args.seconds:.0f} s, {report['crashes']} crashes"
    )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if report["crashes"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
