"""Distilling with the user's Codex login: the real `codex exec` binary, a fake Responses API.

Codex 0.171.0 (npm, pinned) runs offline against `FakeOpenAI`, logged in with a dummy API
key in a throwaway CODEX_HOME. The only difference from production is the model provider,
added by the wrapper in `tests.codex_cli`. Our process has no API key, so `auto` must choose
the Codex login for a Codex rollout.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings
from mtl_mcp.learning.backends.codex import CodexBackend
from mtl_mcp.learning.backends.structured import strict_schema
from mtl_mcp.learning.distill import distill
from mtl_mcp.learning.pipeline import ledger
from mtl_mcp.learning.proposals import DistilledInsights, Judgement, JudgementWithVerdicts
from mtl_mcp.schemas import GivenInsight
from tests.codex_cli import Codex
from tests.conftest import LEAKED, distil_file, distillation_children, queued_jobs
from tests.fake_openai import FakeOpenAI

pytestmark = pytest.mark.slow

ROLLOUT = Path(__file__).parents[1] / "fixtures" / "transcripts" / "codex-rollout.jsonl"
LESSON = {
    "title": "Check rounding rules against the specification",
    "description": "When money or other quantities are rounded in calculations.",
    "content": "Read which rounding mode the domain requires and pin it in a test at the "
    "half-way value; the default mode of a language often differs from the business rule.",
    "polarity": "success",
    "category": "test-verification",
    "domain": "web-backend",
    "languages": ["python"],
    "tags": ["rounding", "tests"],
}
JUDGED = {"outcome": "success", "reason": "the invoice tests pass after the fix"}
DIGEST = "user: fix the invoice rounding\nassistant: fixed it; the invoice tests pass"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def codex(tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Codex:
    """The user's Codex, logged in, as our `codex`; its user config would start an MCP server
    and a notify program, which a distillation must never run."""
    installed = Codex.install(tmp_path, fake)
    for name, value in installed.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MTL_MCP_CODEX_COMMAND", str(installed.command))
    touched = tmp_path / "touched"
    (installed.codex_home / "config.toml").write_text(
        f'notify = ["sh", "-c", "touch {touched}-notify"]\n'
        "[mcp_servers.mine]\n"
        f'command = "sh"\nargs = ["-c", "touch {touched}-mcp; sleep 5"]\n',
        encoding="utf-8",
    )
    return installed


def rollout_with_a_secret(tmp_path: Path) -> Path:
    """The Codex rollout fixture with a live-looking key in a user message."""
    lines = ROLLOUT.read_text(encoding="utf-8").splitlines()
    planted = {
        "timestamp": "2026-03-02T09:00:04.500Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"CI uses AWS_ACCESS_KEY_ID={LEAKED}"}],
        },
    }
    lines.insert(5, json.dumps(planted))
    path = tmp_path / "rollout-2026-03-02T09-00-00-019a2b3c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_auto_distils_a_codex_rollout_through_the_codex_login(
    settings: Settings, fake: FakeOpenAI, codex: Codex, tmp_path: Path
) -> None:
    """No API key: a Codex rollout goes through `codex exec`; the redacted digest, our prompt
    and the strict schema are sent, read-only, nothing of the user's config runs, insights
    stored, tokens in the ledger."""
    fake.reply_json(JUDGED, input_tokens=11_000, output_tokens=60, cached=9_000)
    fake.reply_json({"insights": [LESSON]}, input_tokens=12_000, output_tokens=400)

    outcome = distil_file(rollout_with_a_secret(tmp_path))

    assert outcome["status"] == "stored", outcome
    judge, distilled = fake.response_requests
    for request, schema_of in ((judge, Judgement), (distilled, DistilledInsights)):
        body = request.body
        assert body["text"]["format"]["schema"] == strict_schema(schema_of)
        assert body["text"]["format"]["strict"] is True
        assert body["model"] == "gpt-6-luna" and body["reasoning"]["effort"] == "low"
        assert not [t for t in body.get("tools", []) if "exec" in json.dumps(t)]  # no shell
        turn = json.loads(body["client_metadata"]["x-codex-turn-metadata"])
        assert turn["sandbox_mode"] == "read-only"
        user = "\n".join(request.input_texts("user"))
        assert "[REDACTED" in user and "pytest" in user
    assert any("abstract" in text.lower() for text in distilled.input_texts("developer"))
    assert all(LEAKED not in request.text for request in fake.requests)
    [stored] = Memory(settings).list()[0]
    assert stored.title == LESSON["title"] and stored.distilled_by == "gpt-6-luna"
    assert ledger(settings).used_today("codex") == 11_000 + 60 + 12_000 + 400
    assert not list(tmp_path.glob("touched-*"))  # no notify, no MCP server of the user's
    assert not (codex.codex_home / "sessions").exists()  # --ephemeral: nothing saved


def test_the_command_line_is_locked_down(settings: Settings, tmp_path: Path) -> None:
    """The exact `codex exec` line: the user's auth but not their config, hooks off,
    read-only, ephemeral, no shell, our prompt as developer instructions, schema, stdin."""
    backend = CodexBackend(settings, "/opt/bin/codex")
    argv = backend.command('Say "hi"\nthen stop', tmp_path / "schema.json", tmp_path / "work")
    assert argv[:2] == ["/opt/bin/codex", "exec"]
    for flag in ("--ignore-user-config", "--ephemeral", "--skip-git-repo-check", "--json"):
        assert flag in argv
    pairs = set(itertools.pairwise(argv))
    assert {("--sandbox", "read-only"), ("--disable", "hooks"), ("-m", "gpt-6-luna")} <= pairs
    assert ("-c", "features.shell_tool=false") in pairs
    assert ("-c", 'developer_instructions="Say \\"hi\\"\\nthen stop"') in pairs
    assert ("--output-schema", str(tmp_path / "schema.json")) in pairs
    assert ("-C", str(tmp_path / "work")) in pairs and argv[-1] == "-"  # prompt on stdin


def test_a_codex_that_fails_leaves_the_job_queued(
    settings: Settings, fake: FakeOpenAI, codex: Codex, tmp_path: Path
) -> None:
    """The provider answers 500: `codex exec` exits 1 and the job backs off."""
    fake.reply_status(500, times=3)
    outcome = distil_file(rollout_with_a_secret(tmp_path))
    assert outcome["status"] == "retry" and "codex failed at the judge step" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 1 and "exit 1" in (job.last_error or "")


def test_a_codex_waiting_for_ever_is_killed_at_the_deadline(
    settings: Settings,
    fake: FakeOpenAI,
    codex: Codex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Headers never come (Codex has no timeout for that): killed at MTL_MCP_CLI_TIMEOUT."""
    monkeypatch.setenv("MTL_MCP_CLI_TIMEOUT", "8")
    fake.reply_hang()
    outcome = distil_file(rollout_with_a_secret(tmp_path))
    assert outcome["status"] == "retry" and "did not finish within 8 s" in outcome["detail"]
    assert len(queued_jobs(settings)) == 1
    assert distillation_children(settings) == []  # the whole process group is gone


def test_an_answer_that_is_not_json_leaves_the_job_queued(
    settings: Settings, fake: FakeOpenAI, codex: Codex, tmp_path: Path
) -> None:
    """Codex does not check the schema: prose from the model is unusable, the job stays."""
    fake.reply_text("Sure! Here are some lessons.")  # judge: unusable, so 'unclear'
    fake.reply_text("Sure! Here are some lessons.")  # distill: unusable, the run fails
    outcome = distil_file(rollout_with_a_secret(tmp_path))
    assert outcome["status"] == "retry" and "not JSON" in outcome["detail"]
    assert len(queued_jobs(settings)) == 1 and Memory(settings).list()[1] == 0


def test_without_a_codex_login_the_job_waits(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`codex login status` fails: nothing is sent, no attempt is used, the reason is kept."""
    with FakeOpenAI() as fake:
        logged_out = Codex.install(tmp_path, fake, logged_in=False)
        for name, value in logged_out.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MTL_MCP_CODEX_COMMAND", str(logged_out.command))
        outcome = distil_file(rollout_with_a_secret(tmp_path))
        assert fake.response_requests == []
    assert outcome["status"] == "waiting" and "codex login" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 0


def test_the_codex_login_rates_the_given_insights_in_the_judge_call(
    settings: Settings, fake: FakeOpenAI, codex: Codex
) -> None:
    """The judge's schema with verdicts goes through `codex exec` strict, and its verdicts
    come back mapped to the given insights: no extra call."""
    verdicts = [{"note": 1, "verdict": "misled", "mode": "domain-mismatch", "reason": "wrong"}]
    fake.reply_json({**JUDGED, "verdicts": verdicts})
    fake.reply_json({"insights": []})
    given = [GivenInsight(id="ins_a", title="Round half to even", content="Use banker's rounding.")]
    backend = CodexBackend(settings, str(codex.command))
    result = distill(DIGEST, backend, given=given)
    judge, _ = fake.response_requests
    assert judge.body["text"]["format"]["schema"] == strict_schema(JudgementWithVerdicts)
    assert "1. Round half to even: Use banker's rounding." in "\n".join(judge.input_texts("user"))
    assert [(u.given.id, u.verdict, u.mode) for u in result.uses] == [
        ("ins_a", "misled", "domain-mismatch")
    ]
    assert len(fake.response_requests) == 2
