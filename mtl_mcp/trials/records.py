"""A trial on disk: its plan and state, and the ledger of its runs.

    <home>/trials/<id>/trial.json   the spec (client, suite, arms, tasks in order, seed...)
                                    and its state (status, why it stopped, memory hashes)
    <home>/trials/<id>/runs.jsonl   one line per finished run, appended and synced: a
                                    trial cut short (Ctrl-C, a crash, a budget) resumes
                                    from exactly the runs it has
    <home>/trials/<id>/arms/        the arms' data directories while the trial runs
    <home>/trials/<id>/report.json  the report, once the trial is complete

Everything is owner-only, like the rest of the data directory. No file here holds a
secret: a client's login is reused through its own files (see `trials.clients`), never
copied.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mtl_mcp.errors import InputError, NotFoundError
from mtl_mcp.files import append_private, private_dir, write_private

TRIALS_FOLDER = "trials"
Status = Literal["planned", "running", "interrupted", "stopped", "complete", "failed"]
Protocol = Literal["standard", "transfer"]


class TrialSpec(BaseModel):
    """What a trial is: fixed when it is planned, so a resumed trial runs the same plan."""

    id: str
    client: str
    client_version: str = ""
    model: str | None = None
    suite: str
    suite_path: str
    protocol: Protocol = "standard"
    arms: list[str]
    runs: int
    tasks: list[str]  # in the order they are run
    domains: dict[str, str] = Field(default_factory=dict)  # task -> domain
    seed: int
    max_tokens: int | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    mtl_mcp: str = ""
    # -- state -------------------------------------------------------------------------
    status: Status = "planned"
    stop_reason: str | None = None
    memory_before: str | None = None  # a hash of the user's memory when it was copied
    memory_after: str | None = None  # ... and when the trial ended
    arm_notes: dict[str, int] = Field(default_factory=dict)  # notes in each arm's store


class RunRecord(BaseModel):
    """One session of one task in one arm, and how it went."""

    slot: int  # its place in the trial's schedule
    task: str
    domain: str
    arm: str
    run: int  # 0-based repeat of the task
    store: str | None = None  # the arm data directory it used ("memory", "memory.web")
    passed: bool | None  # None: the run did not complete (client error), not scored
    error: str | None = None
    timed_out: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 0
    tool_calls: int = 0
    seconds: float = 0.0  # the session's wall time
    verify_seconds: float = 0.0
    started_at: datetime
    ended_at: datetime
    session_id: str | None = None
    recalled: list[str] = Field(default_factory=list)  # insight ids shown to the session
    verdicts: list[dict[str, Any]] = Field(default_factory=list)  # the judge's, if any

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


def trials_root(home: Path) -> Path:
    return home / TRIALS_FOLDER


def new_trial_id(home: Path) -> str:
    """A short id, sortable by day: the UTC date and 4 random hex digits (short, because the
    arms' service sockets live under the trial's folder)."""
    while True:
        candidate = f"{datetime.now(UTC):%y%m%d}-{secrets.token_hex(2)}"
        if not (trials_root(home) / candidate).exists():
            return candidate


class TrialFiles:
    """The files of one trial."""

    def __init__(self, home: Path, trial_id: str) -> None:
        if not trial_id or "/" in trial_id or trial_id.startswith("."):
            raise InputError(f"{trial_id!r} is not a trial id: see `mtl-mcp trial list`")
        self.id = trial_id
        self.folder = trials_root(home) / trial_id

    @property
    def spec_file(self) -> Path:
        return self.folder / "trial.json"

    @property
    def runs_file(self) -> Path:
        return self.folder / "runs.jsonl"

    @property
    def report_file(self) -> Path:
        return self.folder / "report.json"

    @property
    def arms_dir(self) -> Path:
        return self.folder / "arms"

    def exists(self) -> bool:
        return self.spec_file.is_file()

    def create(self, spec: TrialSpec) -> None:
        private_dir(self.folder)
        self.save(spec)

    def save(self, spec: TrialSpec) -> None:
        write_private(self.spec_file, spec.model_dump_json(indent=2) + "\n")

    def spec(self) -> TrialSpec:
        if not self.exists():
            raise NotFoundError(f"no trial {self.id}: `mtl-mcp trial list` shows the trials")
        try:
            return TrialSpec.model_validate_json(self.spec_file.read_text(encoding="utf-8"))
        except (ValidationError, ValueError, OSError) as exc:
            raise InputError(
                f"{self.spec_file} is not a trial file mtl-mcp can read ({_first_error(exc)}): "
                "the trial cannot be resumed or reported; delete its folder"
            ) from None

    def add_run(self, record: RunRecord) -> None:
        append_private(self.runs_file, record.model_dump_json() + "\n")

    def runs(self) -> list[RunRecord]:
        """The finished runs, in the order they finished; a torn last line (a crash in the
        middle of an append) is left out, so that run is simply run again."""
        try:
            text = self.runs_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                found.append(RunRecord.model_validate_json(line))
            except (ValidationError, ValueError):
                continue
        return found

    def replace_runs(self, records: list[RunRecord]) -> None:
        """Rewrite the ledger of runs at once (once their recalled ids are known)."""
        write_private(self.runs_file, "".join(r.model_dump_json() + "\n" for r in records))

    def save_report(self, report: dict[str, Any]) -> None:
        write_private(self.report_file, json.dumps(report, indent=2) + "\n")

    def saved_report(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def list_trials(home: Path) -> list[TrialSpec]:
    """Every readable trial of the data directory, newest first."""
    root = trials_root(home)
    try:
        names = sorted((p.name for p in root.iterdir() if p.is_dir()), reverse=True)
    except OSError:
        return []
    found = []
    for name in names:
        files = TrialFiles(home, name)
        if files.exists():
            try:
                found.append(files.spec())
            except InputError:
                continue
    return sorted(found, key=lambda spec: spec.created_at, reverse=True)


def latest_trial(home: Path) -> str:
    trials = list_trials(home)
    if not trials:
        raise NotFoundError("no trial has been run yet: start one with `mtl-mcp trial run`")
    return trials[0].id


def _first_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        return f"{where}: {error['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def utc_now() -> datetime:
    return datetime.now(UTC)


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, making read-only parts writable first."""
    import shutil

    def unlock(function: Any, name: str, _exc: Any) -> None:
        os.chmod(os.path.dirname(name), 0o700)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, 0o700)
        function(name)

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, onerror=unlock)
