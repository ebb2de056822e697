"""A spool of distillation jobs that loses nothing.

A hook writes one JSON file per session into `<home>/spool/pending` and returns. A worker
(one at a time, by a lock file) distils ready jobs and deletes a job only after its insights
are stored. API outages, rate limits and crashes leave the job for a later retry with
backoff; a job that keeps failing moves to `failed/`. `done.jsonl` remembers each
(session id, transcript hash) so the same transcript is never distilled twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, MtlError, TranscriptError
from mtl_mcp.locks import try_exclusive
from mtl_mcp.models import Outcome, Provenance, RecordResult

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BASE_DELAY = timedelta(minutes=1)
MAX_DELAY = timedelta(hours=6)


class Job(BaseModel):
    """One session waiting to be distilled."""

    session_id: str
    transcript_path: str
    cwd: str | None = None
    client: str = "claude-code"
    format: str = "auto"
    reason: str | None = None
    outcome_hint: Outcome = "unknown"
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    attempts: int = 0
    next_attempt_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    last_error: str | None = None


class JobOutcome(BaseModel):
    """What processing one job did."""

    session_id: str
    status: str  # stored | skipped | retry | failed
    detail: str = ""
    results: list[RecordResult] = Field(default_factory=list)


def _safe_name(session_id: str) -> str:
    """A file name for a session id (ids come from outside: no path tricks)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:100]
    return f"{cleaned}-{hashlib.sha256(session_id.encode()).hexdigest()[:8]}.json"


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_private(path: Path, text: str) -> None:
    """Write atomically, readable by the owner only (jobs name transcript paths)."""
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


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
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)

    def enqueue(self, job: Job) -> Path:
        """Add (or refresh) the job for a session; a session has at most one pending job."""
        self._ensure()
        path = self.pending / _safe_name(job.session_id)
        _write_private(path, job.model_dump_json())
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
        if not self.done_log.is_file():
            return False
        with self.done_log.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if entry.get("session_id") == session_id and entry.get("hash") == content_hash:
                    return True
        return False

    def mark_done(self, session_id: str, content_hash: str, stored: int) -> None:
        self._ensure()
        entry = json.dumps(
            {
                "session_id": session_id,
                "hash": content_hash,
                "stored": stored,
                "at": datetime.now(UTC).isoformat(),
            }
        )
        fd = os.open(self.done_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(entry + "\n")

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
        job.last_error = error
        if job.attempts >= MAX_ATTEMPTS:
            self._ensure()
            _write_private(self.failed / path.name, job.model_dump_json())
            path.unlink(missing_ok=True)
            return "failed"
        delay = min(BASE_DELAY * 2 ** (job.attempts - 1), MAX_DELAY)
        job.next_attempt_at = until or datetime.now(UTC) + delay
        _write_private(path, job.model_dump_json())
        return "retry"

    @contextlib.contextmanager
    def worker_lock(self) -> Iterator[bool]:
        """True if this process is now the only worker; False if another one runs."""
        self._ensure()
        with try_exclusive(self.root / "worker.lock") as mine:
            yield mine


def process_job(spool: Spool, path: Path, job: Job) -> JobOutcome:
    """Distil one job and store its insights; the job file goes only once they are stored."""
    from mtl_mcp.distill import is_retryable
    from mtl_mcp.learn import distill_and_store
    from mtl_mcp.project import resolve_project
    from mtl_mcp.store import InsightStore
    from mtl_mcp.transcripts import build_digest, read_transcript

    settings = spool.settings
    transcript = Path(job.transcript_path)
    try:
        content_hash = file_hash(transcript)
    except OSError as exc:
        status = spool.postpone(path, job, f"transcript unreadable: {exc}")
        return JobOutcome(session_id=job.session_id, status=status, detail=str(exc))
    if spool.already_done(job.session_id, content_hash):
        spool.finish(path, job)
        return JobOutcome(
            session_id=job.session_id,
            status="skipped",
            detail="this transcript was already distilled",
        )
    try:
        parsed = read_transcript(transcript, job.format)  # type: ignore[arg-type]
    except TranscriptError as exc:
        status = spool.postpone(path, job, str(exc))
        return JobOutcome(session_id=job.session_id, status=status, detail=str(exc))
    digest = build_digest(parsed, token_budget=settings.digest_tokens)
    if digest.trivial:
        spool.mark_done(job.session_id, content_hash, 0)
        spool.finish(path, job)
        return JobOutcome(
            session_id=job.session_id,
            status="skipped",
            detail="trivial session (a few turns, no tool use)",
        )
    project = resolve_project(job.cwd or parsed.cwd or transcript.parent)
    provenance = Provenance(
        project=project.id,
        session_id=job.session_id,
        client=job.client,
        model=settings.distill_model,
    )
    store = InsightStore(settings)
    try:
        result, results = distill_and_store(
            settings,
            digest.text,
            outcome_hint=job.outcome_hint,
            project=project,
            provenance=provenance,
            store=store,
        )
    except DistillError as exc:
        # A spent budget waits for the next day; anything else backs off and, if it keeps
        # failing (a bad key, unusable output), ends in failed/ for `mtl-mcp queue` to show.
        resets = getattr(exc, "resets_at", None) if is_retryable(exc) else None
        status = spool.postpone(path, job, str(exc), until=resets)
        return JobOutcome(session_id=job.session_id, status=status, detail=str(exc))
    except MtlError as exc:
        status = spool.postpone(path, job, f"could not store insights: {exc}")
        return JobOutcome(session_id=job.session_id, status=status, detail=str(exc))
    finally:
        store.close()
    spool.mark_done(job.session_id, content_hash, sum(r.status == "stored" for r in results))
    spool.finish(path, job)
    return JobOutcome(
        session_id=job.session_id,
        status="stored",
        detail=f"{result.outcome}: {result.reason}",
        results=results,
    )


def run_worker(settings: Settings, *, ignore_backoff: bool = False) -> list[JobOutcome] | None:
    """Process every ready job; None if another worker already holds the lock."""
    spool = Spool(settings)
    outcomes: list[JobOutcome] = []
    with spool.worker_lock() as mine:
        if not mine:
            return None
        seen: set[str] = set()
        while batch := [
            (p, j) for p, j in spool.ready(ignore_backoff=ignore_backoff) if p.name not in seen
        ]:
            for path, job in batch:
                seen.add(path.name)  # a job retried later in this run would spin
                try:
                    outcomes.append(process_job(spool, path, job))
                except Exception as exc:  # one broken job must not strand the rest of the queue
                    logger.exception("job %s failed unexpectedly", job.session_id)
                    status = spool.postpone(path, job, f"unexpected error: {exc!r}")
                    outcomes.append(
                        JobOutcome(session_id=job.session_id, status=status, detail=repr(exc))
                    )
    return outcomes
