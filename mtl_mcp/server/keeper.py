"""The memory a server keeps, and the window a request comes from.

A `MemoryKeeper` owns one memory for a server: it opens the store and loads the model in a
background thread (in-process: once the handshake is answered; in the service: at start),
then re-embeds a store an older runtime made (`Memory.upgrade_vectors`) at a low CPU
priority, saves recall counters every couple of seconds, and consolidates the memory when
no request has come for a while (`Memory.consolidate`, once a day by default). A window's
own context (its project, its session) travels with its connection, in `WINDOW`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import anyio

from mtl_mcp.config import Settings, return_free_heap
from mtl_mcp.errors import MtlError
from mtl_mcp.memory.listeners import ChangeListeners
from mtl_mcp.operations.context import refresh_general_context
from mtl_mcp.operations.retiring import retiring_services
from mtl_mcp.operations.service import SESSION_ENV, is_older

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

logger = logging.getLogger(__name__)
FLUSH_SECONDS = 2.0
# How often a re-embedding waiting for an older release's retiring service looks again.
RETIRING_POLL_SECONDS = 2.0
BACKGROUND_NICE = 19
CONSOLIDATE_CHECK_SECONDS = 60.0  # how often an idle server looks whether a pass is due
IDLE_MERGES = 500  # merges one idle pass makes at most: a bounded hold on the write lock


@dataclass(frozen=True)
class Window:
    """What a client window tells the shared service about itself."""

    project_dir: str | None = None  # its CLAUDE_PROJECT_DIR
    cwd: str | None = None
    client: str | None = None
    session_id: str | None = None  # the client's session, when it says (Claude Code does)


# The window a request comes from, set per connection by the service; None in-process.
WINDOW: ContextVar[Window | None] = ContextVar("mtl_mcp_window", default=None)


class MemoryKeeper:
    """Owns one memory for a server: created on first use (importing numpy, pyarrow and
    lancedb is not free), warmed in a background thread, counters flushed, closed."""

    def __init__(self, settings: Settings, memory: Memory | None = None) -> None:
        self._settings = settings
        self._memory = memory
        self._lock = threading.Lock()
        self._warmer = threading.Thread(target=self._warm, name="mtl-warm", daemon=True)
        self._closing = threading.Event()
        self.listeners = ChangeListeners()  # the open dashboard's live feed
        self.last_asked = time.monotonic()
        self._busy = 0  # requests being answered now (`asked`)

    @contextlib.contextmanager
    def asked(self) -> Iterator[None]:
        """Mark a window's request being answered (a tool call, a library call of the CLI or
        a hook): the memory is not idle while any is, nor for `consolidate_idle_seconds`
        after the last one ended. The dashboard's requests do not count: an open page
        polls all day."""
        self._busy += 1
        self.last_asked = time.monotonic()
        try:
            yield
        finally:
            self._busy -= 1
            self.last_asked = time.monotonic()

    @property
    def settings(self) -> Settings:
        return self._settings

    def get(self) -> Memory:
        with self._lock:
            if self._memory is None:
                from mtl_mcp.memory import Memory

                self._memory = Memory(self._settings, on_change=self._changed)
            return self._memory

    def _changed(self, memory: Memory) -> None:
        refresh_general_context(memory)
        self.listeners()

    def start_warming(self) -> None:
        """Open the store and load the model in the background (once)."""
        with contextlib.suppress(RuntimeError):  # already started by a concurrent request
            self._warmer.start()

    def _warm(self) -> None:
        started = time.monotonic()
        try:
            memory = self.get()
            memory.warm()
            return_free_heap()
            logger.info("warm in %.1f s", time.monotonic() - started)
            if self._closing.is_set():
                return
        except MtlError as exc:  # reported again, to the assistant, on the first tool call
            logger.warning("warm-up failed: %s", exc)
            return
        except Exception:  # never let the warm-up thread die noisily
            logger.exception("warm-up failed")
            return
        lower_priority()  # what follows must never take a core from a recall
        try:
            if self._older_services_gone():
                memory.upgrade_vectors(progress=_progress_log(), stop=self._closing.is_set)
        except (MtlError, OSError, RuntimeError) as exc:  # out of files, a store gone, ...
            # Resumable: recall goes on from the old vectors; the next start goes on with it.
            logger.warning("re-embedding stopped, the next start resumes it: %s", exc)

    def _older_services_gone(self) -> bool:
        """Wait until no older release's service still serves its last windows from this data
        directory: it recalls with the previous runtime, which a finished re-embedding would
        leave it unable to do. False if this keeper closes first."""
        while any(is_older(s["version"]) for s in retiring_services(self._settings.home)):
            if self._closing.wait(RETIRING_POLL_SECONDS):
                return False
        return True

    async def keep_flushing(self) -> None:
        """Save recall counters every FLUSH_SECONDS, until cancelled."""
        while True:
            await anyio.sleep(FLUSH_SECONDS)
            if self._memory is None:
                continue
            try:
                await anyio.to_thread.run_sync(self._memory.flush)
            except MtlError as exc:
                logger.warning("could not save recall counts: %s", exc)
            except Exception:  # a background task must never take the server down
                logger.exception("could not save recall counts")

    async def keep_consolidating(self) -> None:
        """Consolidate the memory once no request has come for `consolidate_idle_seconds`,
        at most once every `consolidate_every_hours` (a pass cut short by its bound goes on
        at the next idle check), until cancelled. The pass runs in a worker thread: recalls
        read the snapshot meanwhile and never wait for it; writes wait for its commit."""
        settings = self._settings
        if settings.consolidate_idle_seconds <= 0:
            return
        check = min(CONSOLIDATE_CHECK_SECONDS, settings.consolidate_idle_seconds)
        while True:
            await anyio.sleep(check)
            memory = self._memory
            if memory is None or not self._due(memory):
                continue
            try:
                await anyio.to_thread.run_sync(self._consolidate, memory)
            except MtlError as exc:
                logger.warning("consolidation skipped: %s", exc)
            except Exception:  # a background task must never take the server down
                logger.exception("consolidation failed")

    def _due(self, memory: Memory) -> bool:
        if (
            self._busy
            or time.monotonic() - self.last_asked < self._settings.consolidate_idle_seconds
        ):
            return False
        last = memory.runs.last_pass()
        every = timedelta(hours=self._settings.consolidate_every_hours)
        return last is None or memory.clock() - last >= every

    def _consolidate(self, memory: Memory) -> None:
        from mtl_mcp.learning.merging import cluster_merger

        run = memory.consolidate(
            trigger="idle", limit=IDLE_MERGES, merger=cluster_merger(self._settings)
        )
        if memory.team is not None:
            memory.consolidate_team(trigger="idle", limit=IDLE_MERGES)
        logger.info(
            "idle consolidation %s: %d merges%s",
            run.run,
            len(run.merged),
            " (more left)" if run.more else "",
        )

    async def close(self) -> None:
        """Wait for a warm-up in flight (an import cut short at exit aborts; a re-embedding
        stops after its batch), then close."""
        self._closing.set()
        if self._warmer.ident is not None:
            await anyio.to_thread.run_sync(self._warmer.join, 10.0)
        if self._memory is not None:
            await anyio.to_thread.run_sync(self._memory.close)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Flush counters while the block runs; close the memory when it ends."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.keep_flushing)
            tasks.start_soon(self.keep_consolidating)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
                await self.close()


def lower_priority() -> None:
    """Give the calling thread (Linux: a thread has its own nice value) the lowest CPU
    priority, for background work that must never slow a recall down."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or not allowed
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def _progress_log() -> Callable[[int, int], None]:
    """A progress callback logging each tenth of the way."""
    said = [-1]

    def log(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth != said[0]:
            said[0] = tenth
            logger.info("re-embedding: %d of %d insights", done, total)

    return log


def window_session(local: bool) -> str | None:
    """The client's session id, when its window says (through the service) or, in-process,
    its environment does; None over HTTP."""
    window = WINDOW.get()
    if window is not None:
        return window.session_id
    return os.environ.get(SESSION_ENV) if local else None
