"""The queue worker: distils ready jobs one at a time, one worker per machine: sessions, and
notes the assistants keep (their memory files, a project's instructions), the same way.

A job file is deleted only once its insights are stored; any failure leaves it queued with
backoff (or until the time a `Retryable` error names), and a job that keeps failing moves
to `failed/` for `mtl-mcp queue` to show. A job no backend can distil waits, its reason
recorded for `mtl-mcp queue`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, InputError, MtlError, Retryable, TranscriptError
from mtl_mcp.files import sha256_file
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.backends.select import Choice, Chooser, source_of
from mtl_mcp.learning.discovery import confined_notes
from mtl_mcp.learning.fitting import digest_room, fit_digest
from mtl_mcp.learning.notes import notes_digest
from mtl_mcp.learning.pipeline import Recorder, digest_transcript, learn, ledger, worker_wait
from mtl_mcp.learning.spool import Job, JobOutcome, Spool, kept_error
from mtl_mcp.learning.transcripts import not_text
from mtl_mcp.project import ProjectRef, resolve_project
from mtl_mcp.schemas import Provenance

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """What a job distils: the digest, the backend and the project."""

    digest: str
    backend: Backend
    project: ProjectRef | None


@dataclass(frozen=True)
class Skipped:
    """Nothing in the job worth a model call: it is done as it is."""

    detail: str


def process_job(
    spool: Spool, path: Path, job: Job, memory: Recorder, chooser: Chooser
) -> JobOutcome:
    """Distil one job and store its insights; the job file goes only once they are stored."""
    settings = spool.settings
    transcript = Path(job.transcript_path)

    def postpone(error: str, exc: MtlError | None = None) -> JobOutcome:
        until = exc.retry_at if isinstance(exc, Retryable) else None
        status = spool.postpone(path, job, error, until=until)
        return JobOutcome(session_id=job.session_id, status=status, detail=error)

    def skip(detail: str, content_hash: str | None = None) -> JobOutcome:
        if content_hash is not None:  # done: never read again while it stays the same
            spool.mark_done(job.session_id, content_hash, 0)
        spool.finish(path, job)
        return JobOutcome(session_id=job.session_id, status="skipped", detail=detail)

    try:
        content_hash = sha256_file(transcript)
    except OSError as exc:
        return postpone(f"transcript unreadable: {exc}")
    if spool.already_done(job.session_id, content_hash):
        return skip(f"this {'file' if job.kind == 'notes' else 'transcript'} was already distilled")
    if problem := not_text(transcript):  # binary: no retry reads it
        # A session is not done (a later transcript may be text); a notes file is found by
        # every backfill, so it is, until its content changes.
        return skip(problem, content_hash if job.kind == "notes" else None)
    prepare = _prepare_notes if job.kind == "notes" else _prepare_session
    try:
        prepared = prepare(job, transcript, settings, chooser)
    except TranscriptError as exc:
        return postpone(str(exc), exc)
    if isinstance(prepared, Skipped):
        return skip(prepared.detail, content_hash)
    if isinstance(prepared, Choice):
        status = spool.wait(path, job, prepared.reason)
        return JobOutcome(session_id=job.session_id, status=status, detail=prepared.reason)
    project = prepared.project
    provenance = Provenance(
        project=project.id if project else None, session_id=job.session_id, client=job.client
    )
    try:
        learned = learn(
            memory,
            prepared.digest,
            backend=prepared.backend,
            outcome_hint=job.outcome_hint,
            project=project,
            provenance=provenance,
            wait=worker_wait(settings),
            given=memory.given_insights(job.session_id) if job.kind == "session" else (),
            kept_notes=job.kind == "notes",
        )
    except DistillError as exc:
        # A spent budget waits for the next day; anything else backs off and, if it keeps
        # failing (a bad key, unusable output), ends in failed/ for `mtl-mcp queue` to show.
        return postpone(str(exc), exc)
    except MtlError as exc:
        return postpone(f"could not store insights: {exc}", exc)
    spool.mark_done(job.session_id, content_hash, learned.stored)
    spool.finish(path, job)
    return JobOutcome(
        session_id=job.session_id,
        status="stored",
        detail=(
            f"{learned.stored} stored, {len(learned.distilled.dropped)} dropped (project facts "
            "stay in the notes)"
            if job.kind == "notes"
            else f"{learned.distilled.outcome}: {learned.distilled.reason}"
        ),
        results=learned.results,
        dropped=learned.distilled.dropped,
    )


def _prepare_session(
    job: Job, transcript: Path, settings: Settings, chooser: Chooser
) -> Prepared | Skipped | Choice:
    """A session's digest, its backend and project; a Choice without a backend says why the
    job waits."""
    parsed, digest = digest_transcript(transcript, settings, job.format)
    if digest.trivial:
        return Skipped("trivial session (a few turns, no tool use)")
    choice = chooser.choose(source_of(parsed.format) or job.client)
    if choice.backend is None:
        return choice
    digest = fit_digest(parsed, digest, choice.backend, settings)  # a small model's window
    project = resolve_project(job.cwd or parsed.cwd or transcript.parent)
    return Prepared(digest.text, choice.backend, project)


def _prepare_notes(
    job: Job, notes: Path, settings: Settings, chooser: Chooser
) -> Prepared | Skipped | Choice:
    """A notes file's text, read by the login of the assistant that keeps it (any backend
    `auto` picks), and its project when known (Codex's memories belong to none)."""
    try:  # queued before this check, or changed since: a link out of its folder is not read
        notes = confined_notes(notes, job.cwd)
    except InputError as exc:
        return Skipped(str(exc))
    choice = chooser.choose(job.client)
    if choice.backend is None:
        return choice
    text = notes_digest(notes, job.client, digest_room(choice.backend, settings))
    if not text:
        return Skipped("the notes are empty")
    return Prepared(text, choice.backend, resolve_project(job.cwd) if job.cwd else None)


def run_worker(
    settings: Settings,
    *,
    ignore_backoff: bool = False,
    on_change: Callable[[Memory], None] | None = None,
    recorder: Recorder | None = None,
) -> list[JobOutcome] | None:
    """Process every ready job; None if another worker already holds the lock.

    Insights go to `recorder` (the running service's memory) if given, else to a memory of
    this process, whose `on_change` is called after insights are stored.
    """
    spool = Spool(settings)
    outcomes: list[JobOutcome] = []
    with spool.worker_lock() as mine:
        if not mine:
            return None
        ledger(settings).prune()
        own: Memory | None = None
        if recorder is None:
            from mtl_mcp.memory import Memory  # LanceDB and numpy: only without the service

            recorder = own = Memory(settings, on_change=on_change)
        chooser = Chooser(settings)  # checks each assistant CLI once per run
        seen: set[str] = set()
        try:
            while batch := [
                (p, j) for p, j in spool.ready(ignore_backoff=ignore_backoff) if p.name not in seen
            ]:
                for path, job in batch:
                    seen.add(path.name)  # a job retried later in this run would spin
                    outcomes.append(_guarded(spool, path, job, recorder, chooser))
        finally:
            if own is not None:
                own.close()
    return outcomes


def _guarded(spool: Spool, path: Path, job: Job, memory: Recorder, chooser: Chooser) -> JobOutcome:
    """One job; a bug in it must not strand the rest of the queue."""
    try:
        return process_job(spool, path, job, memory, chooser)
    except Exception as exc:  # the worker is a front door of its own: it runs detached
        # Never the exception's repr: a UnicodeEncodeError's holds the whole text it failed
        # to encode (a request body, a digest), and the job file keeps it.
        logger.error(
            "job %s failed unexpectedly: %s", job.session_id, kept_error(f"{exc}"), exc_info=True
        )
        error = kept_error(f"unexpected error ({type(exc).__name__}: {exc}); please report it")
        status = spool.postpone(path, job, error)
        return JobOutcome(session_id=job.session_id, status=status, detail=error)
