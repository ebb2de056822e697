"""Time-boxed fuzzing of every reader of untrusted input, with hypothesis.

    python bench/fuzz.py [--seconds 300] [--out FILE]

Targets (the time box is shared equally): the import reader, the transcript readers and
digest, the insight models with the lint, the poisoning check, redaction and rendering,
the hook input parser, and the store's `record` on a real store. A crash is any exception
other than the documented ones (a ValidationError from a model, a ValueError from the hook
parser); the run reports examples tried and crashes per target, and exits 1 on any crash.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.hooks.session import parse_input
from mtl_mcp.learning.transcripts import build_digest, read_transcript
from mtl_mcp.memory.jsonl import read_import
from mtl_mcp.schemas import Insight, InsightDraft, RecallHit
from mtl_mcp.text.lint import lint
from mtl_mcp.text.poisoning import instructions_to_assistant
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import insight_markdown, recall_text

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
     "\U0001f600", "%s", "{}", "$(id)", "`ls`", "<script>", "DROP", "TABLE"]
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
            recall_text([hit])

    return run


def _hook_input(work: Path) -> Callable[..., None]:
    @given(raw=st.one_of(st.text(max_size=3000), JSON.map(json.dumps)))
    def run(raw: str) -> None:
        # Documented failures, which the hook front door logs: ValueError (ValidationError
        # is one) and RecursionError for hostile nesting.
        with contextlib.suppress(ValueError, RecursionError):
            parse_input(raw)

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
    "hook input": _hook_input,
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
    args = parser.parse_args()
    share = args.seconds / len(TARGETS)
    report: dict[str, Any] = {"seconds": args.seconds, "targets": {}}
    with tempfile.TemporaryDirectory(prefix="mtl-fuzz-") as tmp:
        for name in TARGETS:
            work = Path(tmp) / name.split()[0]
            work.mkdir()
            result = fuzz(name, share, work)
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
