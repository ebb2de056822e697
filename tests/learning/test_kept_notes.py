"""Learning from the notes the assistants keep: Claude Code's auto memory, Codex's memories and,
on request, a project's CLAUDE.md, AGENTS.md and Cursor rules.

The notes are mostly project facts. The fake model here proposes facts next to lessons, as a
model that follows the notes prompt badly would, and insists on them in the repair round: the
facts must be dropped by our checks (`proposals.check` with `kept_notes`), the lessons stored.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings
from mtl_mcp.learning.discovery import NotesFile, memory_files, project_note_files
from mtl_mcp.learning.proposals import DistilledInsights, ProposedInsight, check
from mtl_mcp.learning.spool import Spool
from mtl_mcp.schemas import InsightDraft
from mtl_mcp.text.lint import project_facts
from mtl_mcp.text.starter import starter_drafts
from tests.claude_code import ClaudeCode
from tests.conftest import LEAKED, claude_code_transcript, queued_jobs
from tests.fake_anthropic import FakeAnthropic, RecordedRequest

API_KEY = "sk-ant-test-0123456789abcdefghij"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "kept_notes"
NOTES_PROMPT = "You read the notes a coding assistant keeps"
REPAIR_PROMPT = "You are revising draft insights"


def insight(title: str, content: str, polarity: str = "success", **extra: Any) -> dict[str, Any]:
    return {
        "title": title,
        "description": extra.pop(
            "description", "When a change touches behaviour that tests cover."
        ),
        "content": content,
        "polarity": polarity,
        "category": extra.pop("category", "workflow-discipline"),
        "domain": "web-backend",
        "languages": [],
        "tags": extra.pop("tags", []),
    }


# What the fake model proposes for each notes file, keyed by a phrase of the file. Lessons
# (L) transfer; facts (F) are about one project and must be dropped by our checks.
LESSONS = {
    "reproduce": insight(
        "Reproduce a reported failure before fixing it",
        "Turn the report into a failing test first; seeing it fail proves the report was "
        "understood, and the same test later proves the fix.",
    ),
    "bisect": insight(
        "Bisect a regression between a good and a bad state",
        "When a behaviour broke at an unknown point, halve the range of changes between a "
        "known good and a known bad state; a handful of checks finds the culprit.",
        category="exploration",
    ),
    "assertion": insight(
        "Read the failing assertion before the stack trace",
        "The assertion message states what was expected and what came instead, which "
        "usually names the broken assumption faster than the frames below it.",
        category="test-verification",
    ),
    "flaky": insight(
        "Quarantine a flaky test only after reproducing it",
        "Run the test in a loop with the suspected source of nondeterminism varied; only a "
        "reproduced flake tells a real race from a broken environment.",
        polarity="failure",
        category="test-verification",
    ),
}
FACTS = {
    "port": insight(
        "Use the staging database on its fixed port",
        "The staging database listens on port 5433, so start it before the suite runs.",
        category="environment-adaptation",
    ),
    "our": insight(
        "Run the integration suite through make",
        "Our integration suite runs with the make target that brings the containers up first.",
    ),
    "env": insight(
        "Set the billing token before the tests",
        "Export BILLING_API_TOKEN before running tests, or the client fixtures fail at import.",
        category="environment-adaptation",
    ),
    "path": insight(
        "Find the request handlers in the billing package",
        "Handlers live in src/billing/ and each one registers itself in the router module.",
        category="exploration",
    ),
    "preference": insight(
        "Indent with tabs in every file",
        "The user prefers tabs over spaces and short answers without bullet points.",
        category="interaction-protocol",
    ),
    "service": insight(
        "Deploy through the release pipeline only",
        "Deploy this service through the release pipeline so the smoke checks run first.",
        category="workflow-discipline",
    ),
}
PROPOSED = {  # a phrase of the notes file -> what the model proposes for it
    "flaky payment test": [LESSONS["reproduce"], FACTS["port"], FACTS["our"]],
    "regression hunt": [LESSONS["bisect"], FACTS["env"]],
    "Codex handbook": [LESSONS["assertion"], FACTS["path"]],
    "Codex summary": [FACTS["preference"], FACTS["service"]],
    "flake triage": [LESSONS["flaky"]],
}


def lay_out_memories(root: Path) -> dict[str, Path]:
    """Claude Code (under `root/claude`) and Codex (under `root/codex`) memories on disk,
    with a session of the Claude Code project naming its folder."""
    project = root / "work" / "orbit-billing"
    project.mkdir(parents=True)
    folder = root / "claude" / "projects" / "-work-orbit-billing"
    (folder / "memory").mkdir(parents=True)
    session = folder / "s1.jsonl"
    session.write_text(
        json.dumps({"type": "user", "cwd": str(project), "message": {"role": "user"}}) + "\n"
    )
    month_ago = session.stat().st_mtime - 30 * 86400
    os.utime(session, (month_ago, month_ago))  # outside any backfill window here
    codex = root / "codex" / "memories"
    (codex / "skills" / "flake-triage").mkdir(parents=True)
    (codex / "rollout_summaries").mkdir()
    files = {
        "index": folder / "memory" / "MEMORY.md",
        "topic": folder / "memory" / "debugging.md",
        "handbook": codex / "MEMORY.md",
        "summary": codex / "memory_summary.md",
        "skill": codex / "skills" / "flake-triage" / "SKILL.md",
    }
    for name, path in files.items():
        text = (FIXTURES / f"{name}.md").read_text(encoding="utf-8")
        path.write_text(text.replace("{planted_key}", LEAKED), encoding="utf-8")
    # Restatements of single rollouts, which the session backfill reads already: left out.
    (codex / "raw_memories.md").write_text("ROLLOUT-ONLY raw memory of one thread\n")
    (codex / "rollout_summaries" / "t1.md").write_text("ROLLOUT-ONLY summary of one thread\n")
    return files


class NotesModel:
    """The fake model: the proposals for the notes in a distill request (by a phrase of the
    notes file); in a repair request, the very drafts it was asked to revise: it insists on
    the facts."""

    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake
        self.proposed = dict(PROPOSED)

    def __call__(self, request: RecordedRequest) -> dict[str, Any]:
        text = request.user_text
        if REPAIR_PROMPT in request.system:
            drafts = [json.loads(m) for m in re.findall(r"^Draft \d+:\n(\{.*\})$", text, re.M)]
            payload = {"insights": drafts}
        else:
            assert NOTES_PROMPT in request.system, "a notes file must get the notes prompt"
            [phrase] = [phrase for phrase in self.proposed if phrase in text]
            payload = {"insights": self.proposed[phrase]}
        DistilledInsights.model_validate(payload)  # what our backend will parse
        return self.fake.message(json.dumps(payload), input_tokens=400, output_tokens=120)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def model(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> NotesModel:
    """The fake model, reached with an API key."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    answers = NotesModel(fake)
    fake.reply_while(answers)
    return answers


@pytest.fixture
def memories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    return lay_out_memories(tmp_path)


def distill(*args: str) -> tuple[list[dict[str, Any]], str]:
    result: Result = CliRunner().invoke(cli, ["distill", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.mark.slow
def test_memories_keep_the_lessons_and_drop_the_facts(
    settings: Settings,
    fake: FakeAnthropic,
    model: NotesModel,
    memories: dict[str, Path],
) -> None:
    """5 memory files, 4 lessons and 6 facts proposed: the 4 lessons are stored, every fact is
    dropped by our checks after the repair round; no secret is sent or stored; no judge call."""

    outcomes, said = distill("--memories")

    assert "memory files: 5 new or changed, 0 unchanged" in said
    assert {o["status"] for o in outcomes} == {"stored"} and len(outcomes) == 5
    stored = Memory(settings).list(limit=50)[0]
    assert sorted(i.title for i in stored) == sorted(str(x["title"]) for x in LESSONS.values())
    dropped = [line for o in outcomes for line in o["dropped"]]
    assert sorted(line.split(":")[0] for line in dropped) == sorted(
        str(x["title"]) for x in FACTS.values()
    )
    assert all("still failing after repair" in line for line in dropped)
    # Our checks named each fact's mark to the model in the repair round.
    repairs = [r for r in fake.message_requests if REPAIR_PROMPT in r.system]
    asked = "\n".join(r.user_text for r in repairs)
    for mark in ("port 5433", "(Our)", "BILLING_API_TOKEN", "src/billing/", "The user prefers"):
        assert mark in asked, mark
    assert "this service" in asked
    # No judge: a distill call per file, a repair call per file with a fact in it.
    assert len(fake.message_requests) == 5 + 4
    sent = "".join(r.text for r in fake.requests)
    assert LEAKED not in sent and "[REDACTED" in sent
    assert "ROLLOUT-ONLY" not in sent  # raw memories and rollout summaries are not read
    everything = json.dumps([i.model_dump(mode="json") for i in stored])
    assert LEAKED not in everything
    # The Claude Code project is known (from its session), so its name is ruled out too.
    index_request = next(r for r in fake.message_requests if "flaky payment test" in r.text)
    assert 'called "orbit-billing"' in index_request.system
    by_title = {i.title: i for i in stored}
    project = memories["index"].parents[4] / "work" / "orbit-billing"
    assert by_title[str(LESSONS["reproduce"]["title"])].project == str(project)
    assert by_title[str(LESSONS["assertion"]["title"])].project is None  # Codex: no project
    assert Spool(settings).notes_learnt() == 5
    doctor = doctor_check()
    assert (
        doctor["ok"]
        and "5 memory files on this machine (claude-code 2, codex 3)" in doctor["detail"]
    )
    assert "5 notes files learnt from" in doctor["detail"] and "changed" not in doctor["detail"]


def doctor_check() -> dict[str, Any]:
    """`mtl-mcp doctor`'s line on the assistants' memories."""
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    [check] = [c for c in json.loads(result.stdout) if c["name"] == "assistant memories"]
    return dict(check)


@pytest.mark.slow
def test_a_memory_file_is_read_again_only_when_its_content_changes(
    settings: Settings,
    fake: FakeAnthropic,
    model: NotesModel,
    memories: dict[str, Path],
) -> None:
    """Run twice: the second run reads nothing, even with every file touched; edit one file:
    only that one is read again, once."""
    distill("--memories")
    calls = len(fake.requests)
    for path in memories.values():
        os.utime(path)  # a newer mtime, the same content

    outcomes, said = distill("--since", "7d")

    assert outcomes == [] and len(fake.requests) == calls
    assert "memory files: 0 new or changed, 5 unchanged (not read again)" in said
    topic = memories["topic"]
    topic.write_text(topic.read_text() + "\n- Keep the bisect script next to the notes.\n")

    outcomes, said = distill("--memories")

    assert "memory files: 1 new or changed, 4 unchanged" in said
    assert [o["session_id"] for o in outcomes] == [f"notes:{topic}"]
    after = fake.message_requests[calls:]
    distilled, repaired = after
    assert "regression hunt" in distilled.user_text and REPAIR_PROMPT in repaired.system
    assert distill("--memories")[0] == []


def test_the_default_backfill_reads_recent_memories_and_never_project_notes(
    settings: Settings,
    memories: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--since` takes memory files changed within the window (an older one is left for
    `--memories`), `--no-memories` none; a project's CLAUDE.md only with --project-notes."""
    old = memories["summary"]
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - 30 * 86400))
    project = tmp_path / "work" / "orbit-billing"
    (project / "CLAUDE.md").write_text("Use pnpm.\n")
    monkeypatch.chdir(project)

    listed = CliRunner().invoke(cli, ["distill", "--since", "7d", "--dry-run"])

    assert listed.exit_code == 0, listed.output
    assert set(listed.stdout.split()) == {str(p) for k, p in memories.items() if k != "summary"}
    assert "0 sessions from the last 7d; memory files: 4 new" in listed.stderr
    only = CliRunner().invoke(cli, ["distill", "--since", "7d", "--no-memories", "--dry-run"])
    assert only.stdout == "" and "0 sessions from the last 7d" in only.stderr
    everything = CliRunner().invoke(cli, ["distill", "--memories", "--dry-run", "--json"])
    assert sorted(json.loads(everything.stdout)) == sorted(str(p) for p in memories.values())
    notes = CliRunner().invoke(cli, ["distill", "--project-notes", "--dry-run"])
    assert notes.stdout.split() == [str(project / "CLAUDE.md")]
    assert queued_jobs(settings) == []  # a dry run queues nothing


def test_the_cli_says_what_goes_together(memories: dict[str, Path]) -> None:
    """One mode at a time, in the project's words."""
    both = CliRunner().invoke(cli, ["distill", "--memories", "--since", "7d"])
    assert both.exit_code == 2 and "exactly one of FILE, --pending, --since" in both.output
    alone = CliRunner().invoke(cli, ["distill", "--memories", "--no-memories"])
    assert alone.exit_code == 2 and "--no-memories goes with --since" in alone.output


@pytest.mark.slow
def test_project_notes_on_request_keep_only_what_transfers(
    settings: Settings,
    fake: FakeAnthropic,
    model: NotesModel,
    tmp_path: Path,
) -> None:
    """CLAUDE.md, AGENTS.md, .cursorrules and .cursor/rules/*.mdc of a project: each read once,
    with the project's name ruled out; a fact naming the project is dropped."""
    project = tmp_path / "orbit-billing"
    (project / ".cursor" / "rules" / "backend").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("# orbit-billing\nflaky payment test notes\n")
    (project / "AGENTS.md").write_text("Codex handbook for agents\n")
    (project / ".cursorrules").write_text("regression hunt rules\n")
    (project / ".cursor" / "rules" / "backend" / "tests.mdc").write_text(
        "---\ndescription: tests\nglobs: ['**/*.py']\n---\nflake triage\n"
    )
    named = insight(
        "Build orbit-billing images with the shared base",
        "Build the orbit-billing images from the shared base image so the layers are cached.",
    )
    model.proposed["Codex handbook"] = [LESSONS["assertion"], named]

    outcomes, said = distill("--project-notes", str(project))

    assert "project notes: 4 new or changed, 0 unchanged" in said and len(outcomes) == 4
    stored = {i.title for i in Memory(settings).list(limit=50)[0]}
    assert stored == {
        str(LESSONS[k]["title"]) for k in ("reproduce", "bisect", "assertion", "flaky")
    }
    dropped = "\n".join(line for o in outcomes for line in o["dropped"])
    assert "mentions this project's name" in dropped and str(named["title"]) in dropped
    assert all('called "orbit-billing"' in r.system for r in fake.message_requests)
    assert distill("--project-notes", str(project))[0] == []  # never twice


@pytest.mark.slow
def test_without_an_api_key_the_claude_code_login_distils_the_auto_memory(
    settings: Settings, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No API key: Claude Code's own memory goes through `claude -p` (the real binary, a fake
    API); the fact is dropped by our checks, the lesson stored, the key never sent."""
    claude = ClaudeCode.install(tmp_path, fake)
    claude.update_settings(
        env={"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "sk-ant-test-dummy-key"}
    )
    monkeypatch.setenv("HOME", str(claude.home))  # the default ~/.claude, as the user has it
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", str(claude.binary))
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    folder = claude.home / ".claude" / "projects" / "-work-orbit-billing" / "memory"
    folder.mkdir(parents=True)
    notes = (FIXTURES / "index.md").read_text(encoding="utf-8")
    (folder / "MEMORY.md").write_text(notes.replace("{planted_key}", LEAKED), encoding="utf-8")
    fake.reply_tool("StructuredOutput", {"insights": [LESSONS["reproduce"], FACTS["port"]]})
    fake.reply_tool("StructuredOutput", {"insights": [FACTS["port"]]})  # it insists

    [outcome], said = distill("--memories")

    assert outcome["status"] == "stored", outcome
    assert "memory files: 1 new" in said
    assert [i.title for i in Memory(settings).list()[0]] == [LESSONS["reproduce"]["title"]]
    assert outcome["dropped"][0].startswith(str(FACTS["port"]["title"]))
    distilled, repaired = fake.message_requests
    assert NOTES_PROMPT in distilled.system and REPAIR_PROMPT in repaired.system
    assert "port 5433" in repaired.user_text  # our check's finding, sent back for repair
    assert all(LEAKED not in r.text for r in fake.requests)


def test_without_any_backend_memory_files_wait_in_the_queue(
    settings: Settings, memories: dict[str, Path]
) -> None:
    """No key, no login: every file waits, nothing is learnt or marked read, and the queue
    says why; a later run reads them."""
    outcomes, _ = distill("--memories")
    assert {o["status"] for o in outcomes} == {"waiting"} and len(outcomes) == 5
    assert "no model to distil with" in outcomes[0]["detail"]
    assert Spool(settings).notes_learnt() == 0
    assert {job.kind for job in queued_jobs(settings)} == {"notes"}
    assert "memory files: 5 new or changed" in distill("--memories")[1]
    assert "0 notes files learnt from so far; 5 new or changed since" in doctor_check()["detail"]


def test_discovery_follows_the_layouts(memories: dict[str, Path], tmp_path: Path) -> None:
    """Claude Code: projects/*/memory/*.md; Codex: MEMORY.md, memory_summary.md and
    skills/*/SKILL.md at any depth (its per-folder buckets too), never raw memories or
    rollout summaries."""
    bucket = tmp_path / "codex" / "memories" / "0123456789abcdef" / "memory"
    bucket.mkdir(parents=True)
    (bucket / "MEMORY.md").write_text("bucketed handbook\n")
    (bucket / "raw_memories.md").write_text("raw\n")
    found = {n.path: n for n in memory_files()}
    assert set(found) == {*memories.values(), bucket / "MEMORY.md"}
    assert found[memories["index"]].client == "claude-code"
    assert found[memories["index"]].cwd == str(tmp_path / "work" / "orbit-billing")
    assert found[memories["skill"]].client == "codex" and found[memories["skill"]].cwd is None
    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "CLAUDE.md").write_text("x")
    (project / "AGENTS.md").write_text("x")
    assert [(n.path.name, n.client) for n in project_note_files(project)] == [
        ("CLAUDE.md", "claude-code"),
        ("AGENTS.md", "codex"),
    ]


def proposal(text: str) -> ProposedInsight:
    return ProposedInsight.model_validate(
        insight(" ".join(text.split()[:6]), text, description="When working on the project.")
    )


def test_the_fact_gate_keeps_every_shipped_lesson_and_catches_marked_facts() -> None:
    """The stricter check for notes rejects none of the 174 lessons we ship or evaluate with,
    and catches the facts that carry a mark (15 of the 24 typical ones here; the rest are
    left to the notes prompt); a session's check stays as lenient as before."""
    pool = Path(__file__).parents[2] / "mtl_mcp" / "data" / "eval" / "pool.jsonl"
    fields = ("title", "description", "content")
    rows = [json.loads(line) for line in pool.read_text(encoding="utf-8").splitlines()]
    lessons = [InsightDraft.model_validate({k: row[k] for k in fields}) for row in rows]
    lessons += starter_drafts()
    assert len(lessons) == 174
    assert [d.title for d in lessons if project_facts(d)] == []
    facts = (FIXTURES / "facts.txt").read_text().splitlines()
    caught = [f for f in facts if check(proposal(f), "unclear", None, kept_notes=True).errors]
    assert len(facts) == 24 and len(caught) == 15
    assert not check(proposal(facts[0]), "unclear", None).errors  # sessions: warnings at most


def test_the_session_end_hook_queues_what_the_assistant_remembered(
    settings: Settings, memories: dict[str, Path], tmp_path: Path
) -> None:
    """A Claude Code session's end also queues its project's memory files, a Codex session's
    Codex's memories; only those whose content was not learnt yet, and no other folder's."""
    from mtl_mcp.files import sha256_file
    from mtl_mcp.hooks.session import session_end

    folder = memories["index"].parent.parent
    transcript = claude_code_transcript(folder / "s2.jsonl", "s2")
    payload = {"session_id": "s2", "transcript_path": str(transcript), "cwd": str(tmp_path)}

    said = session_end(json.dumps(payload), settings)

    assert said == "queued session s2 and 2 changed memory files"
    queued = {job.transcript_path: job for job in queued_jobs(settings)}
    assert set(queued) == {str(transcript), str(memories["index"]), str(memories["topic"])}
    assert queued[str(memories["index"])].kind == "notes"
    spool = Spool(settings)
    spool.mark_done(f"notes:{memories['index']}", sha256_file(memories["index"]), 1)
    assert session_end(json.dumps(payload), settings) == (
        "queued session s2 and 1 changed memory files"
    )
    rollout = tmp_path / "codex" / "sessions" / "rollout-2026-12-01T10-00-00-abc.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text(transcript.read_text())  # a conversation is all the hook looks for
    codex = {"session_id": "c1", "transcript_path": str(rollout), "cwd": str(tmp_path)}
    assert session_end(json.dumps(codex), settings).endswith("and 3 changed memory files")
    elsewhere = tmp_path / "elsewhere" / "s3.jsonl"
    (elsewhere.parent / "memory").mkdir(parents=True)
    (elsewhere.parent / "memory" / "notes.md").write_text("not an assistant's memory\n")
    claude_code_transcript(elsewhere, "s3")
    other = {"session_id": "s3", "transcript_path": str(elsewhere), "cwd": str(tmp_path)}
    assert session_end(json.dumps(other), settings) == "queued session s3"


def test_a_memory_file_linked_out_of_its_folder_is_never_read(
    settings: Settings,
    fake: FakeAnthropic,
    model: NotesModel,
    memories: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As for transcripts, links are followed and the file must stay in its folder: MEMORY.md
    linked to a private note, a topic file to /etc/passwd, Codex's handbook and a project's
    CLAUDE.md to files elsewhere are not listed, queued or sent to the model; a link that
    stays inside (one project's memory to another's) is read as any file. A job queued
    before the link changed is skipped when its turn comes."""
    private = tmp_path / "private" / "note.md"
    private.parent.mkdir()
    private.write_text("PRIVATE-NOTE: my bank PIN is 4321\n")
    inside = memories["index"].parents[2] / "-other-project" / "memory" / "shared.md"
    inside.parent.mkdir(parents=True)
    inside.write_text(memories["topic"].read_text())
    memories["topic"].unlink()
    for path, target in [
        (memories["index"], private),
        (memories["index"].with_name("passwd.md"), Path("/etc/passwd")),
        (memories["handbook"], private),
        (memories["topic"], inside),
    ]:
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    project = tmp_path / "work" / "orbit-billing"
    (project / "CLAUDE.md").symlink_to(private)
    monkeypatch.chdir(project)

    listed = CliRunner().invoke(cli, ["distill", "--memories", "--dry-run", "--json"])
    notes = CliRunner().invoke(cli, ["distill", "--project-notes", "--dry-run", "--json"])

    assert listed.exit_code == 0 and notes.exit_code == 0, listed.output + notes.output
    expected = {memories["topic"], inside, memories["summary"], memories["skill"]}
    assert set(json.loads(listed.stdout)) == {str(p) for p in expected}
    assert json.loads(notes.stdout) == []
    Spool(settings).enqueue(NotesFile(memories["index"], "claude-code").job())  # queued before
    outcomes, _ = distill("--memories")
    sent = "".join(r.text for r in fake.requests)
    assert "PRIVATE-NOTE" not in sent and "root:x:0:0" not in sent
    skipped = [o for o in outcomes if o["status"] == "skipped"]
    assert [o["session_id"] for o in skipped] == [f"notes:{memories['index']}"]
    assert "leads out of the folder it is in" in skipped[0]["detail"]
