"""Distilling with an OpenAI-compatible endpoint (a local model): the real client against
`FakeChat` on 127.0.0.1, in each of the ways a server or a small model answers."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from click.testing import CliRunner
from mcp.client import Client
from pydantic import BaseModel, Field

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import BudgetExceeded, DistillError, DistillUnavailable, Retryable
from mtl_mcp.learning.answers import answer_summary
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend, digest_cut
from mtl_mcp.learning.backends.openai_endpoint import api_key, is_loopback
from mtl_mcp.learning.backends.select import Chooser
from mtl_mcp.learning.backends.structured import loose_json, strict_schema
from mtl_mcp.learning.distill import distill
from mtl_mcp.learning.pipeline import check_budget, ledger
from mtl_mcp.learning.proposals import Judgement
from mtl_mcp.learning.spend import Usage
from mtl_mcp.operations.doctor import run_checks
from mtl_mcp.server.app import build_server
from mtl_mcp.text.tokens import estimate_tokens
from tests.conftest import LEAKED, claude_code_transcript, distil_file, queued_jobs
from tests.fake_chat import JUDGED, LESSON, MANGLE_VARIANTS, MODEL, FakeChat, mangle

DIGEST = "user: fix the flaky date test\nassistant: froze the clock; 42 passed"
KEY = "sk-proj-" + "Q7vX2mK9pL4wR8tY3nB6cJ1hF5dG0sA2"


@pytest.fixture
def fake() -> Iterator[FakeChat]:
    with FakeChat() as server:
        yield server


def local(fake: FakeChat, monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    """Settings (and the environment of CLI runs) pointing at `fake`."""
    monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", MODEL)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def ask(backend: OpenAIBackend, answer: type[BaseModel] = Judgement, **options: Any) -> Any:
    return backend.ask(
        step="judge",
        system="You judge sessions.",
        user=DIGEST,
        answer=answer,
        max_tokens=options.pop("max_tokens", 200),
        usage=options.pop("usage", Usage()),
    )


# -- structured output ----------------------------------------------------------------------


def test_a_request_asks_for_the_strict_schema_and_counts_the_servers_usage(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """response_format json_schema (strict) with the same schema as the other backends, the
    schema in the system prompt too, temperature 0, the step's max_tokens; usage as the
    server reports it."""
    settings = local(fake, monkeypatch)
    usage = Usage()
    verdict = ask(OpenAIBackend(settings), usage=usage)
    assert verdict == Judgement.model_validate(fake.answers["Judgement"])
    [request] = fake.chat_requests
    body = request.body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Judgement", "schema": strict_schema(Judgement), "strict": True},
    }
    assert body["model"] == MODEL and body["temperature"] == 0 and body["max_tokens"] == 200
    assert json.dumps(strict_schema(Judgement), separators=(",", ":")) in request.message("system")
    assert request.message("user") == DIGEST
    assert "authorization" not in request.headers  # a local server gets no key
    assert usage.input_tokens == len(request.message("system") + DIGEST) // 4
    assert answer_summary(settings.home)["openai"]["valid"] == 1


def test_a_fenced_answer_with_prose_around_it_is_recovered_without_another_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeChat(mode="fenced") as fake:
        settings = local(fake, monkeypatch)
        assert ask(OpenAIBackend(settings)).outcome == "success"
        assert len(fake.chat_requests) == 1
    assert answer_summary(settings.home)["openai"]["recovered"] == 1


@pytest.mark.parametrize("variant", [v for v in MANGLE_VARIANTS if v != "wrong-keys"])
@pytest.mark.parametrize(
    "payload",
    [{"insights": [LESSON], "complete": True, "note": None}, JUDGED],
    ids=["nested", "flat"],
)
def test_almost_json_is_mended(variant: str, payload: dict[str, Any]) -> None:
    """Trailing commas, single quotes, a cut-off end, Python literals, unquoted keys,
    comments, prose after it, missing commas: the payload comes back."""
    text = mangle(payload, variant)
    data, mended = loose_json(text)
    assert mended or text == json.dumps(payload, indent=1)  # nothing to mangle
    if variant == "truncated-string":  # the cut field is lost, what came before is kept
        assert data.items() < payload.items() or data["insights"][0]["title"] == LESSON["title"]
    else:
        assert data == payload


def test_an_answer_wrapped_in_one_key_is_unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeChat() as fake:
        fake.reply_text(json.dumps({"judgement": JUDGED}))
        settings = local(fake, monkeypatch)
        assert ask(OpenAIBackend(settings)).outcome == "success"
        assert len(fake.chat_requests) == 1
    assert answer_summary(settings.home)["openai"]["recovered"] == 1


def test_invalid_json_gets_one_repair_round_that_names_the_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeChat(mode="invalid-then-valid") as fake:
        settings = local(fake, monkeypatch)
        usage = Usage()
        assert ask(OpenAIBackend(settings), usage=usage).outcome == "success"
        first, second = fake.chat_requests
    roles = [m["role"] for m in second.body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert second.message("assistant") == "{'result': 'the session went well', 'notes': [1, 2,"
    assert first.body["messages"] == second.body["messages"][:2]
    assert "outcome is missing" in second.message("user", 1)
    assert usage.input_tokens > 0 and usage.output_tokens > 0  # both requests counted
    assert answer_summary(settings.home)["openai"]["repaired"] == 1


def test_garbage_twice_is_retryable_and_counts_as_a_rejection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not UnusableOutput: the job stays queued with backoff, as in an outage."""
    with FakeChat(mode="garbage") as fake:
        settings = local(fake, monkeypatch)
        with pytest.raises(DistillUnavailable, match="did not return usable JSON") as caught:
            ask(OpenAIBackend(settings))
        assert len(fake.chat_requests) == 2
    assert isinstance(caught.value, Retryable)
    row = answer_summary(settings.home)["openai"]
    assert row["rejected"] == 1 and row["reject_rate"] == 1.0


class Step(BaseModel):
    kind: Literal["edit", "run", "read"]
    target: str | None = None
    notes: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    """A nested answer: a list of objects with an enum and an optional field."""

    goal: str
    risk: Literal["low", "high"]
    steps: list[Step]
    owner: str | None


PLAN = {
    "goal": "fix the date bug",
    "risk": "low",
    "steps": [
        {"kind": "read", "target": None, "notes": []},
        {"kind": "run", "target": "the tests", "notes": ["freeze the clock", "month end"]},
    ],
    "owner": None,
}


@pytest.mark.parametrize("mode", ["schema", "fenced", "almost"])
def test_any_answer_model_works_nested_lists_enums_and_optionals(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeChat(mode=mode, variant="python-literals") as fake:
        fake.answers["Plan"] = PLAN
        settings = local(fake, monkeypatch)
        assert ask(OpenAIBackend(settings), Plan) == Plan.model_validate(PLAN)
        [request] = fake.chat_requests
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["steps"]["items"]["additionalProperties"] is False


def test_a_server_without_structured_output_gets_the_schema_in_the_prompt_only(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_status(400, text="response_format type json_schema is not supported")
    settings = local(fake, monkeypatch)
    backend = OpenAIBackend(settings)
    assert ask(backend).outcome == "success"
    assert ask(backend).outcome == "success"  # remembered: no refused request again
    refused, *later = fake.chat_requests
    assert "response_format" in refused.body
    assert [("response_format" in r.body) for r in later] == [False, False]


# -- failures -------------------------------------------------------------------------------


def test_a_server_slower_than_the_timeout_is_retryable(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeChat(mode="slow", delay=10) as fake:
        settings = local(fake, monkeypatch, MTL_MCP_OPENAI_TIMEOUT="0.5")
        usage = Usage()
        started = time.perf_counter()
        with pytest.raises(DistillUnavailable, match=r"did not answer within 0.5 s"):
            ask(OpenAIBackend(settings), usage=usage, max_tokens=150)
    assert time.perf_counter() - started < 5
    assert usage.output_tokens == 150  # a call cut at its deadline counts whole


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_is_down_is_retryable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", MODEL)
    settings = load_settings()
    backend = OpenAIBackend(settings)
    backend._context = (8192, "test")  # skip the probes
    with pytest.raises(DistillUnavailable, match="unreachable"):
        ask(backend)


def test_a_429_says_when_to_come_back(fake: FakeChat, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.reply_status(429, retry_after="120", text="server busy")
    settings = local(fake, monkeypatch)
    before = datetime.now(UTC)
    with pytest.raises(DistillUnavailable, match="429: server busy") as caught:
        ask(OpenAIBackend(settings))
    assert caught.value.retry_at is not None
    assert timedelta(seconds=119) <= caught.value.retry_at - before <= timedelta(seconds=125)


def test_a_missing_model_says_how_to_pull_it(fake: FakeChat, monkeypatch: pytest.MonkeyPatch):
    settings = local(fake, monkeypatch, MTL_MCP_OPENAI_MODEL="llama3.2")
    with pytest.raises(DistillError, match=r"ollama pull llama3.2") as caught:
        ask(OpenAIBackend(settings))
    assert not isinstance(caught.value, Retryable)


# -- fitting the model -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "context", "source"),
    [
        ("ollama", 4096, "Ollama's num_ctx"),
        ("llamacpp", 3072, "llama.cpp's /props"),
        ("vllm", 16384, "model list (max_model_len)"),
        ("ollama", None, "MTL_MCP_OPENAI_CONTEXT_TOKENS, within the model's 40,960"),
        ("plain", None, "MTL_MCP_OPENAI_CONTEXT_TOKENS"),
    ],
)
def test_the_context_window_comes_from_the_server_where_it_says(
    flavour: str, context: int | None, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeChat(flavour=flavour, context=context) as fake:
        settings = local(fake, monkeypatch)
        tokens, said = OpenAIBackend(settings).context_window()
    assert tokens == (context or 8192) and source in said


def test_a_long_session_is_cut_to_fit_a_small_window(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama runs the model with 4,096 tokens: every request fits, and the digest keeps
    the user's request and how the session ended."""
    transcript = long_transcript(tmp_path / "long.jsonl")
    with FakeChat(context=4096) as fake:
        local(fake, monkeypatch)
        outcome = distil_file(transcript)
        requests = fake.chat_requests
    assert outcome["status"] == "stored", outcome
    for request in requests:
        sent = "".join(m["content"] for m in request.body["messages"])
        assert estimate_tokens(sent) + request.body["max_tokens"] <= 4096
    judge = requests[0].message("user")
    assert "the nightly report crashes" in judge and "all 300 tests pass" in judge


def long_transcript(path: Path) -> Path:
    lines: list[dict[str, Any]] = [
        {"type": "user", "message": {"role": "user", "content": "the nightly report crashes"}}
    ]
    for i in range(150):
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{i}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Bash",
                            "input": {"command": f"pytest tests/test_part_{i}.py -q -k case_{i}"},
                        }
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{i}",
                            "is_error": True,
                            "content": f"FAILED test_part_{i}.py::case_{i} - AssertionError "
                            + "x" * 300,
                        }
                    ],
                },
            }
        )
    lines.append(
        {
            "type": "assistant",
            "message": {
                "id": "end",
                "role": "assistant",
                "content": [{"type": "text", "text": "Fixed it: all 300 tests pass now."}],
            },
        }
    )
    common = {"sessionId": "long", "cwd": str(path.parent), "isSidechain": False}
    path.write_text(
        "\n".join(json.dumps({**common, "uuid": f"u{i}", **line}) for i, line in enumerate(lines))
        + "\n",
        encoding="utf-8",
    )
    return path


def test_digest_cut_keeps_both_ends_of_the_digest() -> None:
    body = "\n".join(f"line {i} " + "y" * 60 for i in range(400))
    user = f"Judge it.\n\n<session_digest>\n{body}\n</session_digest>"
    cut = digest_cut(user, 1000)
    assert estimate_tokens(cut) <= 1000
    assert cut.startswith("Judge it.\n\n<session_digest>\nline 0 ")
    assert "line 399 " in cut and cut.endswith("</session_digest>")
    assert "lines cut to fit the model's context window" in cut


# -- the pipeline, the front doors ----------------------------------------------------------


def test_distill_file_goes_to_the_local_model_first_and_no_secret_reaches_it(
    fake: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base URL wins over an API key under auto; the digest is redacted; the insight is
    stored with the model as provenance; tokens land in the ledger as local."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
    settings = local(fake, monkeypatch)
    outcome = distil_file(claude_code_transcript(tmp_path / "s.jsonl"))
    assert outcome["status"] == "stored", outcome
    judge, distilled = fake.chat_requests
    assert [r.body["response_format"]["json_schema"]["name"] for r in (judge, distilled)] == [
        "Judgement",
        "DistilledInsights",
    ]
    assert "[REDACTED" in judge.message("user")
    assert all(LEAKED not in request.text for request in fake.requests)
    [stored] = Memory(settings).list()[0]
    assert stored.title == LESSON["title"] and stored.distilled_by == MODEL
    spent = ledger(settings)
    assert spent.used_today("openai") > 0 and spent.used_today() == 0  # local: not daily


def test_a_queued_job_waits_while_the_local_server_is_down(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is off (as a laptop's Ollama often is): the job waits without using an
    attempt and never goes to another backend; `queue` says what to start."""
    monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", MODEL)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
    outcome = distil_file(claude_code_transcript(tmp_path / "s.jsonl"))
    assert outcome["status"] == "waiting" and "ollama serve" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 0 and "auto uses only the configured endpoint" in (job.last_error or "")


def test_unusable_answers_leave_the_job_queued_with_backoff(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeChat(mode="garbage") as fake:
        local(fake, monkeypatch)
        outcome = distil_file(claude_code_transcript(tmp_path / "s.jsonl"))
    assert outcome["status"] == "retry" and "did not return usable JSON" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 1
    shown = CliRunner().invoke(cli, ["stats"]).stdout
    # The judge's answer was rejected after its repair round: the run stops there.
    assert "openai answers: 1 (0 valid" in shown and "1 rejected: 100%" in shown


def test_a_429_postpones_the_job_until_retry_after(
    settings: Settings, fake: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_status(429, retry_after="3600")
    local(fake, monkeypatch, MTL_MCP_DISTILL_BACKEND="openai")
    outcome = distil_file(claude_code_transcript(tmp_path / "s.jsonl"))
    assert outcome["status"] == "retry"
    [job] = queued_jobs(settings)
    assert job.next_attempt_at - datetime.now(UTC) > timedelta(minutes=55)


def test_record_session_without_insights_distils_with_the_local_model(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = local(fake, monkeypatch)

    async def record() -> Any:
        async with Client(build_server(settings)) as client:
            return await client.call_tool(
                "record_session",
                {
                    "summary": f"Froze the clock to fix a date test. key {LEAKED}",
                    "outcome": "success",
                },
            )

    result = anyio.run(record)
    assert not result.is_error, result.content
    assert f"distilled with {MODEL} via openai" in str(result.structured_content)
    [request] = fake.chat_requests  # the outcome is given: no judge call
    assert LEAKED not in request.text


def test_dry_run_and_install_name_the_local_model_at_no_charge(
    fake: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local(fake, monkeypatch)
    transcript = claude_code_transcript(tmp_path / "s.jsonl")
    report = json.loads(
        CliRunner().invoke(cli, ["distill", str(transcript), "--dry-run", "--json"]).stdout
    )
    assert report["backend"] == "openai" and report["model"] == MODEL
    assert report["local"] and report["worst_case_usd"] == 0
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    installed = CliRunner().invoke(cli, ["install", "claude-code", "--dry-run"])
    assert f"your local model {MODEL}" in installed.stderr
    assert "no charge (it runs on this machine)" in installed.stderr
    assert "no daily limit" in installed.stderr
    assert fake.chat_requests == []


# -- doctor ---------------------------------------------------------------------------------


def endpoint_check(settings: Settings) -> Any:
    [check] = [c for c in run_checks(settings) if c.name == "openai endpoint"]
    return check


def test_doctor_probes_the_endpoint_with_a_tiny_structured_call(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.answers["_Ping"] = {"answer": "yes", "because": "arithmetic"}
    check = endpoint_check(local(fake, monkeypatch, MTL_MCP_LOCAL_DAILY_TOKENS="500000"))
    assert check.ok, check
    assert (
        "answers and lists it" in check.detail and "a structured answer came back" in check.detail
    )
    assert "at most 500,000 tokens a day (MTL_MCP_LOCAL_DAILY_TOKENS)" in check.detail
    [ping] = fake.chat_requests
    assert ping.body["response_format"]["json_schema"]["name"] == "_Ping"


@pytest.mark.parametrize(
    ("problem", "fix"),
    [
        ("missing model", "run `ollama pull llama3.2`"),
        ("down", "start the server (`ollama serve`"),
        ("garbage", "cannot follow the JSON schema"),
    ],
)
def test_doctor_says_what_to_fix(problem: str, fix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeChat(mode="garbage" if problem == "garbage" else "schema") as fake:
        settings = local(fake, monkeypatch)
        if problem == "missing model":
            settings = replace(settings, openai_model="llama3.2")
        if problem == "down":
            settings = replace(settings, openai_base_url=f"http://127.0.0.1:{free_port()}/v1")
        check = endpoint_check(settings)
    assert not check.ok and fix in (check.fix or "")


# -- auto, budgets, keys -------------------------------------------------------------------


def test_auto_prefers_a_configured_endpoint_and_explains_an_unset_one(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
    choice = Chooser(local(fake, monkeypatch)).choose("claude-code")
    assert choice.backend is not None and choice.backend.name == "openai"
    assert "auto: MTL_MCP_OPENAI_BASE_URL is set" in choice.reason
    monkeypatch.delenv("MTL_MCP_OPENAI_BASE_URL")
    choice = Chooser(load_settings(distill_backend="openai")).choose(None)
    assert choice.backend is None and "MTL_MCP_OPENAI_BASE_URL is not set" in choice.reason


def test_a_local_model_has_its_own_budget_and_not_the_daily_one(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MTL_MCP_DAILY_TOKENS=0 leaves a local model on; MTL_MCP_LOCAL_DAILY_TOKENS=0 turns
    it off, and a cap holds it."""
    settings = local(fake, monkeypatch, MTL_MCP_DAILY_TOKENS="0")
    backend = Chooser(settings).choose(None).backend
    assert backend is not None
    check_budget(settings, backend, 20_000)  # no daily limit
    capped = replace(settings, local_daily_tokens=25_000)
    ledger(settings).record(10_000, session="a", backend="openai", local=True)
    with pytest.raises(BudgetExceeded, match="MTL_MCP_LOCAL_DAILY_TOKENS"):
        check_budget(capped, backend, 20_000)
    off = Chooser(replace(settings, local_daily_tokens=0)).choose(None)
    assert off.backend is None and "MTL_MCP_LOCAL_DAILY_TOKENS=0" in off.reason


def test_a_remote_endpoint_is_a_paid_api_with_the_daily_budget_and_openai_api_key(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    remote = replace(settings, openai_base_url="https://api.openai.com/v1", openai_model="m")
    assert not is_loopback(remote.openai_base_url) and api_key(remote) == KEY
    loop = replace(remote, openai_base_url="http://localhost:1234/v1")
    assert is_loopback(loop.openai_base_url) and api_key(loop) is None  # not sent locally
    assert api_key(replace(loop, openai_api_key="lm-studio")) == "lm-studio"
    backend = OpenAIBackend(remote)
    assert not backend.local
    ledger(settings).record(299_000, session="a", backend="anthropic")
    with pytest.raises(BudgetExceeded, match="MTL_MCP_DAILY_TOKENS"):
        check_budget(remote, backend, 20_000)


@pytest.mark.parametrize("host", ["0.0.0.0", "127.1", "localhost."])
def test_every_spelling_of_this_machine_is_local_no_key_no_proxy(
    host: str, fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base URL naming this machine in another form (Ollama's docs write 0.0.0.0) is local:
    OPENAI_API_KEY is not sent to it, and no proxy from the environment carries the digest
    off the machine (a dead one here: the request must not go through it)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(proxy, f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    url = fake.base_url.replace("127.0.0.1", host)
    settings = local(fake, monkeypatch, MTL_MCP_OPENAI_BASE_URL=url)
    backend = OpenAIBackend(settings)
    assert backend.local and api_key(settings) is None
    if host == "localhost.":  # not every resolver reads the root-qualified name
        return
    ask(backend)
    assert "authorization" not in fake.chat_requests[0].headers
    for mapped in ("http://[::ffff:127.0.0.1]:1/v1", "http://[::]:1/v1", "http://2130706433/v1"):
        assert is_loopback(mapped)
    assert not is_loopback("http://10.0.0.7:11434/v1") and not is_loopback("http://ollama.lan/v1")


def test_a_password_in_the_base_url_is_used_but_never_shown(
    fake: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway behind basic auth (https://user:password@host/v1): the request carries the
    credentials, but no message names them: not doctor's, not `distill`'s, not the error
    the queued job keeps in the spool."""
    password = "S3cretPw" + "9871"
    url = fake.base_url.replace("://", f"://bob:{password}@")
    settings = local(fake, monkeypatch, MTL_MCP_OPENAI_BASE_URL=url)
    fake.reply_status(500, text="overloaded")
    with pytest.raises(DistillUnavailable) as caught:
        ask(OpenAIBackend(settings))
    assert fake.chat_requests[0].headers["authorization"].startswith("Basic ")
    down = replace(
        settings, openai_base_url=url.replace(fake.origin.rsplit(":", 1)[1], str(free_port()))
    )
    monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", down.openai_base_url)
    outcome = distil_file(claude_code_transcript(tmp_path / "session.jsonl"))
    said = [str(caught.value), endpoint_check(down).detail, json.dumps(outcome)]
    said += [json.dumps(job.model_dump(mode="json")) for job in queued_jobs(down)]
    assert outcome["status"] == "waiting" and "bob:" not in said[1]
    for text in said:
        assert password not in text, text


def test_the_key_is_sent_as_a_bearer_token_and_never_shown(
    fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = local(fake, monkeypatch, MTL_MCP_OPENAI_API_KEY=KEY)
    fake.reply_status(401, text="bad key")
    with pytest.raises(DistillError) as caught:
        ask(OpenAIBackend(settings))
    assert fake.chat_requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(settings) and KEY not in str(caught.value)
    assert "MTL_MCP_OPENAI_API_KEY" in str(caught.value)


def test_distill_runs_the_whole_pipeline_on_a_small_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judge, distill and the lint's repair round all through one backend; the lint and
    dedup of the other backends apply."""
    with FakeChat(mode="fenced") as fake:
        settings = local(fake, monkeypatch)
        result = distill(DIGEST, OpenAIBackend(settings))
    assert result.outcome == "success" and [d.title for d in result.drafts] == [LESSON["title"]]
