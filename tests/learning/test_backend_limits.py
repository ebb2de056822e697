"""Every backend that reads an answer ends within its deadline and reads at most its cap,
whatever the other end does: a server that drips its headers or its body, one that sends
400 MB, a model whose answer holds a lone surrogate, an assistant CLI that prints on and on.

The servers are `HostileServer` (raw sockets on 127.0.0.1) and `FakeChat`; the clients are
the real ones (httpx2, the anthropic SDK, a child process). `hung_up` is what the server
saw: the client stopped reading before the answer's end, which is the property a user
relies on (no call takes longer or more memory than its limits), measured without a clock.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import DistillUnavailable
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.backends.anthropic_api import AnthropicBackend, make_client
from mtl_mcp.learning.backends.child import run_child
from mtl_mcp.learning.backends.claude_code import ClaudeCodeBackend
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend
from mtl_mcp.learning.backends.openai_endpoint import endpoint_status
from mtl_mcp.learning.proposals import Judgement
from mtl_mcp.learning.spend import Usage
from tests.conftest import claude_code_transcript, distil_file, queued_jobs
from tests.fake_chat import JUDGED, MODEL, FakeChat
from tests.fake_hostile import HostileServer

COMPLETION = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": json.dumps(JUDGED)}}]}
).encode()


def openai_settings(base_url: str, monkeypatch: pytest.MonkeyPatch, timeout: str) -> Settings:
    monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", MODEL)
    monkeypatch.setenv("MTL_MCP_OPENAI_TIMEOUT", timeout)
    return load_settings()


def judge(backend: Backend) -> Judgement:
    answer = backend.ask(
        step="judge",
        system="You judge sessions.",
        user="user: fix the test\nassistant: fixed; 3 passed",
        answer=Judgement,
        max_tokens=100,
        usage=Usage(),
    )
    assert isinstance(answer, Judgement)
    return answer


def probeless(backend: OpenAIBackend) -> OpenAIBackend:
    backend._context = (8192, "test")  # the chat request alone: no context-window probes
    return backend


@pytest.mark.parametrize(
    "drip",
    [
        {"drip": b" " * 60, "body": COMPLETION[:-1]},  # the body, a byte every 0.3 s
        {"drip_headers": True},  # the headers themselves
    ],
    ids=["body", "headers"],
)
def test_an_openai_server_that_drips_its_answer_is_cut_at_the_deadline(
    drip: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MTL_MCP_OPENAI_TIMEOUT is the whole request's deadline, not each read's: every byte
    comes within the read timeout, and still the client hangs up and says why."""
    with HostileServer() as server:
        server.answer(interval=0.3, **drip)
        backend = probeless(OpenAIBackend(openai_settings(server.base_url, monkeypatch, "1")))
        with pytest.raises(DistillUnavailable, match=r"did not answer within 1 s"):
            judge(backend)
        backend.close()
        server.wait_hung_up(1)
    assert server.served == 0


def test_a_huge_openai_answer_is_not_read_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 400 MB answer stops at ANSWER_MAX_BYTES: the client hangs up, never holds it."""
    with HostileServer() as server:
        server.answer(b'{"choices": [{"message": {"content": ', size=400 << 20)
        backend = probeless(OpenAIBackend(openai_settings(server.base_url, monkeypatch, "60")))
        with pytest.raises(DistillUnavailable, match=r"larger than 8 MB"):
            judge(backend)
        backend.close()
        server.wait_hung_up(1)


def test_doctors_probe_of_a_dripping_or_huge_model_list_ends_at_its_probe_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`endpoint_status` (what doctor shows) within PROBE_TIMEOUT, and within the cap."""
    with HostileServer() as server:
        server.answer(b'{"data": [', drip=b" " * 100, interval=0.5)
        server.answer(b'{"data": ', size=400 << 20)
        settings = openai_settings(server.base_url, monkeypatch, "300")
        slow = endpoint_status(settings)
        huge = endpoint_status(settings)
        server.wait_hung_up(2)
    assert not slow.usable and "did not answer within 5 s" in slow.detail
    assert not huge.usable and "sent more than it should" in huge.detail


def test_a_lone_surrogate_in_an_answer_is_one_bad_answer_not_a_crash(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`\\ud83d` in the model's answer: the repair request still encodes (no
    UnicodeEncodeError), the job is postponed once with our message, and neither the job
    file nor the log holds the request's body."""
    with FakeChat(mode="garbage") as fake:
        fake.reply_text('{"outcome": "success", "reason": "done \ud83d')
        monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", MODEL)
        outcome = distil_file(claude_code_transcript(tmp_path / "s.jsonl"))
        repair = fake.chat_requests[1]
    assert repair.body is not None  # it was sent, as valid JSON
    assert outcome["status"] == "retry" and "did not return usable JSON" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 1
    assert "nightly report" not in (job.last_error or "")  # the digest: the request's body
    log = settings.logs_dir / "worker.log"
    assert not log.exists() or "nightly report" not in log.read_text(encoding="utf-8")


def test_a_surrogate_answer_that_fits_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The surrogate is replaced; the rest of a fitting answer is used as it is."""
    with FakeChat() as fake:
        fake.reply_text('{"outcome": "success", "reason": "tests pass \ud83d"}')
        backend = probeless(OpenAIBackend(openai_settings(fake.base_url, monkeypatch, "30")))
        assert judge(backend).reason.startswith("tests pass")
        assert len(fake.chat_requests) == 1  # no repair round: the answer was usable


def test_the_anthropic_sdk_is_held_to_the_calls_deadline_and_cap(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's own timeout bounds each read; ours the call, its retries included."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
    with HostileServer() as server:
        server.answer(b'{"id": "msg_1", "type": "message", ', drip=b" " * 100, interval=0.3)
        server.answer(b'{"id": "msg_1", "content": ', size=400 << 20)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url.removesuffix("/v1"))
        client = make_client(settings, timeout=1.0, max_retries=0)
        backend = AnthropicBackend(settings, client)
        with pytest.raises(DistillUnavailable, match=r"did not finish answering within 16 s"):
            judge(backend)
        with pytest.raises(DistillUnavailable, match=r"larger than 8 MB"):
            judge(backend)
        client.close()
        server.wait_hung_up(2)


def test_a_child_that_prints_on_and_on_is_stopped_at_the_output_cap(tmp_path: Path) -> None:
    """Not buffered whole until the deadline: stopped once it passes OUTPUT_MAX_BYTES."""
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('y' * 65536)"]
    done = run_child(endless, what="endless", timeout=120, stdin="the prompt")
    assert done.killed_for_output and not done.killed_at_deadline and done.stdout == ""
    quiet = run_child(
        [sys.executable, "-c", "print(len(input()))"], what="echo", timeout=60, stdin="abc"
    )
    assert quiet.stdout.strip() == "3" and not quiet.stopped


def test_claude_printing_past_the_cap_is_our_error(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\nexec yes 'a line of output that never ends'\n")
    script.chmod(0o755)
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", str(script))
    backend = ClaudeCodeBackend(load_settings(), str(script))
    with pytest.raises(DistillUnavailable, match=r"claude printed more than 8 MB and was stopped"):
        judge(backend)


def test_doctors_structured_call_has_its_own_short_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model list answers, the chat request drips: `doctor` gives up at its own
    deadline for the question, not at MTL_MCP_OPENAI_TIMEOUT (300 s, a job's)."""
    from mtl_mcp.operations import doctor

    monkeypatch.setattr(doctor, "PING_TIMEOUT", 1.0)
    with HostileServer() as server:
        server.answer(json.dumps({"data": [{"id": MODEL}]}).encode())
        server.answer(b"{}")  # Ollama's /api/show
        server.answer(b"{}")  # llama.cpp's /props
        server.answer(b"{", drip=b" " * 100, interval=0.3)
        settings = openai_settings(server.base_url, monkeypatch, "300")
        check = doctor._openai_endpoint(settings)
        server.wait_hung_up(1)
    assert not check.ok and "did not answer within 1 s at the doctor step" in check.detail


def test_a_sampled_answer_past_the_cap_is_one_unusable_answer() -> None:
    """MCP sampling: the client holds the call, so its deadline is the client's; what it
    answers is read only up to ANSWER_MAX_CHARS, and a longer answer is unusable output."""
    from mtl_mcp.errors import UnusableOutput
    from mtl_mcp.learning.backends.sampling import ANSWER_MAX_CHARS, SampledAnswers

    huge = json.dumps({"outcome": "success", "reason": "x" * ANSWER_MAX_CHARS})
    with pytest.raises(UnusableOutput, match=r"the answer is [\d,]+ characters long"):
        judge(SampledAnswers([huge], "client-model"))
    assert judge(SampledAnswers([json.dumps(JUDGED)], "client-model")).outcome == "success"
