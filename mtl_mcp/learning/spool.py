"""A spool of distillation jobs that loses nothing.

A hook writes one JSON file per session into `<home>/spool/pending` and returns. A worker
(one at a time, by a lock file) distils ready jobs and deletes a job only after its insights
are stored. API outages, rate limits and crashes leave the job for a later retry with
backoff; a job that keeps failing moves to `failed/`. A job nothing can distil yet (no API
key, no logged-in assistant CLI, distillation off) waits without using up its attempts.
`done.jsonl` remembers each (session id, transcript hash) so the same transcript is never
distilled twice. A file of notes an assistant keeps (kind "notes": a memory file, a project's
instructions) is a job like a session, its id `notes:<path>`: it is read again only once its
content hash changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.files import append_private, private_dir, write_private
from mtl_mcp.learning.transcripts import Format
from mtl_mcp.schemas import Outcome, RecordResult
from mtl_mcp.storage.locks import try_exclusive
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
ERROR_KEPT_CHARS = 600  # of a job's last error: what went wrong, never a request's body
BASE_DELAY = timedelta(minutes=1)
MAX_DELAY = timedelta(hours=6)
NO_BACKEND_RECHECK = timedelta(minutes=30)


JobKind = Literal["session", "notes"]
NOTES_PREFIX = "notes:"  # the id of a notes job: this and the file's path


class Job(BaseModel):
    """One session (or one file of notes an assistant keeps) waiting to be distilled."""

    session_id: str
    transcript_path: str  # for notes, the notes file
    kind: JobKind = "session"
    cwd: str | None = None
    client: str = "claude-code"
    format: Format = "auto"
    reason: str | None = None
    outcome_hint: Outcome = "unknown"
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    attempts: int = 0
    next_attempt_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    last_error: str | None = None


def kept_error(error: str) -> str:
    """An error as a job file keeps it: one line, short, secrets redacted (an exception's
    text can quote what it failed on, a whole request body)."""
    return redact(one_line(error, ERROR_KEPT_CHARS))


class JobOutcome(BaseModel):
    """What processing one job did."""

    session_id: str
    status: str  # stored | skipped | retry | failed | waiting
    detail: str = ""
    results: list[RecordResult] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)  # "<title>: why the checks dropped it"


def _safe_name(session_id: str) -> str:
    """A file name for a session id (ids come from outside: no path tricks)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:100]
    return f"{cleaned}-{hashlib.sha256(session_id.encode()).hexdigest()[:8]}.json"


class Spool:
    """The job directories under `<home>/spool`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.home / "spool"
        self.pending = self.root / "pending"
        self.failed = self.root / "failed"
        self.done_log = self.root / "done.jsonl"

    def _ensure(self) -> None:
        for folder in (self.settings.home, self.root, self.pending, self.failed):
            private_dir(folder)

    def enqueue(self, job: Job) -> Path:
        """Add (or refresh) the job for a session; a session has at most one pending job."""
        self._ensure()
        path = self.pending / _safe_name(job.session_id)
        write_private(path, job.model_dump_json())
        return path

    def jobs(self, folder: Path | None = None) -> Iterator[tuple[Path, Job]]:
        folder = folder or self.pending
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.json")):
            try:
                yield path, Job.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValidationError, UnicodeDecodeError) as exc:
                logger.warning("unreadable job %s moved to failed/: %s", path.name, exc)
                with contextlib.suppress(OSError):
                    self._ensure()
                    path.replace(self.failed / path.name)

    def ready(
        self, now: datetime | None = None, *, ignore_backoff: bool = False
    ) -> list[tuple[Path, Job]]:
        now = now or datetime.now(UTC)
        return [(p, j) for p, j in self.jobs() if ignore_backoff or j.next_attempt_at <= now]

    def already_done(self, session_id: str, content_hash: str) -> bool:
        return (session_id, content_hash) in self.done()

    def done(self) -> set[tuple[str, str]]:
        """Every (session id, content hash) distilled so far."""
        if not self.done_log.is_file():
            return set()
        found = set()
        with self.done_log.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    found.add((str(entry.get("session_id")), str(entry.get("hash"))))
        return found

    def notes_learnt(self) -> int:
        """How many notes files (memory files, project instructions) were distilled."""
        return len({job for job, _ in self.done() if job.startswith(NOTES_PREFIX)})

    def mark_done(self, session_id: str, content_hash: str, stored: int) -> None:
        entry = {
            "session_id": session_id,
            "hash": content_hash,
            "stored": stored,
            "at": datetime.now(UTC).isoformat(),
        }
        append_private(self.done_log, json.dumps(entry))

    def is_current(self, path: Path, job: Job) -> bool:
        """False if the session was queued again (a newer transcript) while `job` ran."""
        try:
            on_disk = Job.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, UnicodeDecodeError):
            return True
        return on_disk.created_at == job.created_at

    def finish(self, path: Path, job: Job) -> None:
        """Remove a done job, unless it was queued again meanwhile: that one still waits."""
        if self.is_current(path, job):
            path.unlink(missing_ok=True)

    def postpone(self, path: Path, job: Job, error: str, until: datetime | None = None) -> str:
        """Record a failed attempt; back off, or give up after MAX_ATTEMPTS."""
        if not self.is_current(path, job):
            return "retry"  # the newer job for this session replaces this attempt
        job.attempts += 1
        job.last_error = kept_error(error)
        if job.attempts >= MAX_ATTEMPTS:
            self._ensure()
            write_private(self.failed / path.name, job.model_dump_json())
            path.unlink(missing_ok=True)
            return "failed"
        delay = min(BASE_DELAY * 2 ** (job.attempts - 1), MAX_DELAY)
        job.next_attempt_at = until or datetime.now(UTC) + delay
        write_private(path, job.model_dump_json())
        return "retry"

    def wait(self, path: Path, job: Job, reason: str) -> str:
        """Keep a job that no backend can distil yet, without counting an attempt; it is
        looked at again after NO_BACKEND_RECHECK (at once with `distill --pending`)."""
        if self.is_current(path, job):
            job.last_error = kept_error(reason)
            job.next_attempt_at = datetime.now(UTC) + NO_BACKEND_RECHECK
            write_private(path, job.model_dump_json())
        return "waiting"

    def requeue_failed(self) -> int:
        """Move every failed job back to the queue with a fresh start; returns how many."""
        moved = 0
        for path, job in list(self.jobs(self.failed)):
            job.attempts, job.next_attempt_at = 0, datetime.now(UTC)
            self.enqueue(job)
            path.unlink()
            moved += 1
        return moved

    def listing(self) -> list[dict[str, object]]:
        """Every pending and failed job, as `mtl-mcp queue` shows them."""
        return [
            {"state": state, **job.model_dump(mode="json")}
            for state, folder in (("pending", self.pending), ("failed", self.failed))
            for _, job in self.jobs(folder)
        ]

    @contextlib.contextmanager
    def worker_lock(self) -> Iterator[bool]:
        """True if this process is now the only worker; False if another one runs."""
        self._ensure()
        with try_exclusive(self.root / "worker.lock") as mine:
            yield mine
