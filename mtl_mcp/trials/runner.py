"""Running a trial: every session in a fresh copy of its task, in a throwaway client home,
then the hidden verifier; one line in the trial's ledger per session.

- A session's work dir is a fresh copy of the task's repo (`suite.prepare_workdir`) in a
  temporary folder, with the client's throwaway home and TMPDIR beside it; the folder is
  removed when the session ends, however it ends.
- The verifier is copied in only after the session (`suite.run_verifier`).
- A session that outlives its task's timeout is killed with its whole process group and
  counts as failed. One the client could not run (an API error, a lost login) is not scored
  and is run again on resume; three in a row stop the trial with the client's message.
- `max_tokens`: before each session, the trial stops if what it spent plus a typical session
  would pass the budget; the report says what each arm spent.
- Ctrl-C kills the session in flight, removes its folder, stops the arms' services and
  leaves the trial resumable (`mtl-mcp trial run --resume ID`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mtl_mcp.config import Settings
from mtl_mcp.errors import InputError, MtlError
from mtl_mcp.operations.retiring import detached_workers
from mtl_mcp.operations.service import SOCKET_PATH_MAX, stop_services
from mtl_mcp.storage.ledger import LEDGER_FILE, Ledger
from mtl_mcp.text.redact import redact
from mtl_mcp.trials import suite as suites
from mtl_mcp.trials.arms import ArmStore, ArmStores, memory_hash
from mtl_mcp.trials.clients import ClientAdapter
from mtl_mcp.trials.plan import Estimate, Slot, estimate_from, schedule
from mtl_mcp.trials.records import RunRecord, TrialFiles, TrialSpec, remove_tree, utc_now

logger = logging.getLogger(__name__)

ERRORS_IN_A_ROW = 3
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL of a session's process group
WAKE_SECONDS = 0.5  # the longest a session's wait goes without running Python's signal handlers
RECALL_GRACE = 5.0  # seconds after a session in which its hooks' recalls may still land
# A session-start hook that found no service shows the cached context and leaves recording
# it (and refreshing it) to a detached, niced process: on a busy machine that takes seconds.
SETTLE_SECONDS = 60.0
Say = Callable[[str], None]


class TrialStopped(MtlError):
    """The trial stopped before its end: the budget (`budget`), or a client that kept
    failing, or the user at the calibration question."""

    def __init__(self, message: str, *, budget: bool = False) -> None:
        super().__init__(message)
        self.budget = budget


class Runner:
    """Runs the remaining sessions of one trial."""

    def __init__(
        self,
        files: TrialFiles,
        suite: suites.Suite,
        adapter: ClientAdapter,
        user: Settings,
        say: Say = lambda _line: None,
    ) -> None:
        self.files = files
        self.spec = files.spec()
        self.suite = suite
        self.tasks = {t.id: t for t in suite.tasks}
        self.adapter = adapter
        self.user = user
        self.say = say
        self.stores = ArmStores(
            files.folder, user, self.spec.arms, self.spec.protocol, suite, self.spec.seed
        )
        missing = [t for t in self.spec.tasks if t not in self.tasks]
        if missing:
            raise InputError(
                f"the suite at {suite.path} no longer has task {missing[0]} of trial "
                f"{self.spec.id}: restore it, or start a new trial"
            )

    # -- the plan ----------------------------------------------------------------------------

    @staticmethod
    def slots_left(spec: TrialSpec, runs: list[RunRecord]) -> list[Slot]:
        """The sessions still to run: those with no scored record (an error is run again)."""
        done = {r.slot for r in runs if r.passed is not None}
        return [slot for slot in schedule(spec) if slot.index not in done]

    def remaining(self) -> list[Slot]:
        return self.slots_left(self.spec, self.files.runs())

    def prepare(self) -> None:
        """Build the arms' memories (once: a resumed trial reuses them) and check that
        their services can listen. Records the hash of the user's memory first."""
        spec = self.files.spec()
        tasks = [self.tasks[t] for t in spec.tasks]
        for arm in spec.arms:
            for task in tasks:
                store = self.stores.store_for(arm, task)
                if store is not None:
                    _check_socket_room(store)
        if spec.memory_before is None:
            spec.memory_before = memory_hash(self.user)
        self.say("preparing the arms' memories (a frozen copy each)")
        clock = time.monotonic()
        spec.arm_notes = self.stores.build(tasks)
        self.say(f"prepared {len(spec.arm_notes)} memories in {time.monotonic() - clock:.0f} s")
        self.files.save(spec)
        self.spec = spec

    # -- running -----------------------------------------------------------------------------

    def run(
        self, estimate: Estimate, calibrated: Callable[[Estimate], bool] | None = None
    ) -> TrialSpec:
        """Run every remaining session. `calibrated` is asked once, after the first session
        of a trial with no estimate, whether to go on (the CLI asks the user)."""
        spec = self.spec
        spec.status, spec.stop_reason = "running", None
        self.files.save(spec)
        errors = 0
        warm: set[str] = set()
        try:
            for slot in self.remaining():
                self._check_budget(estimate)
                task = self.tasks[slot.task]
                store = self.stores.store_for(slot.arm, task)
                if store is not None and store.key not in warm and self.adapter.uses_service:
                    warm = self._warm_services(self.stores.domain_of(task), warm)
                record = self.session(slot, task, store)
                self.files.add_run(record)
                if store is not None:  # saved first: a Ctrl-C while it waits loses nothing
                    settle(store.home)
                verdict = (
                    "error" if record.passed is None else ("pass" if record.passed else "fail")
                )
                self.say(
                    f"[{slot.index + 1}/{len(schedule(spec))}] {task.id} {slot.arm}: {verdict}"
                    f" ({record.tokens} tokens, {record.seconds:.0f} s)"
                    + (f": {record.error}" if record.error else "")
                )
                errors = errors + 1 if record.passed is None else 0
                if errors >= ERRORS_IN_A_ROW:
                    raise TrialStopped(
                        f"{self.adapter.label} failed {errors} sessions in a row ({record.error}): "
                        f"fix that, then resume with `mtl-mcp trial run --resume {spec.id}`"
                    )
                if estimate.tokens is None and calibrated is not None:
                    estimate = estimate_from(self.files.runs(), "from this trial's first session")
                    if estimate.tokens is not None and not calibrated(estimate):
                        raise TrialStopped(
                            f"stopped after the calibration session: resume with "
                            f"`mtl-mcp trial run --resume {spec.id}`"
                        )
                    calibrated = None
        except KeyboardInterrupt:
            self._end(
                "interrupted", f"interrupted: resume with `mtl-mcp trial run --resume {spec.id}`"
            )
            raise
        except TrialStopped as exc:
            self._end("stopped", str(exc))
            raise
        except BaseException as exc:
            self._end("failed", f"{type(exc).__name__}: {exc}")
            raise
        self._end("complete", None)
        return self.spec

    def _warm_services(self, domain: str | None, warm: set[str]) -> set[str]:
        """Start the services of every arm memory of `domain` (the only one, but under the
        transfer protocol) and load their models, all at once, before its first session: no
        session pays for a cold start (its hooks have a budget of a second). Those of the
        domain before are stopped; the keys now warm."""
        stores = {
            store.key: store
            for arm in self.spec.arms
            for task in self.tasks.values()
            if self.stores.domain_of(task) == domain
            and (store := self.stores.store_for(arm, task)) is not None
        }
        for key in warm - set(stores):
            stop_services(self.stores.home_of(key))
        clock = time.monotonic()
        env = self.service_environment()
        with ThreadPoolExecutor(max_workers=len(stores)) as pool:
            list(pool.map(lambda store: self.stores.warm(store, env), stores.values()))
        self.say(f"started {len(stores)} memory services in {time.monotonic() - clock:.0f} s")
        return set(stores)

    def _check_budget(self, estimate: Estimate) -> None:
        budget = self.spec.max_tokens
        if not budget:
            return
        runs = self.files.runs()
        spent = sum(r.tokens for r in runs)
        typical = estimate_from(runs, "").tokens or estimate.tokens or 0
        if spent + typical > budget:
            raise TrialStopped(
                f"the token budget stops the trial: {spent} of {budget} tokens spent, and a "
                f"session takes about {typical:.0f}; resume with a larger one: "
                f"`mtl-mcp trial run --resume {self.spec.id} --max-tokens N`",
                budget=True,
            )

    def _end(self, status: str, reason: str | None) -> None:
        """Stop the arms' services (their ledgers flushed), fill in what each run recalled,
        and record how the trial ended; a complete trial's arm copies are removed."""
        with contextlib.suppress(Exception):
            self.stores.stop()
        for home in self.stores.homes():  # a stopped trial does not wait long for it
            settle(home, SETTLE_SECONDS if status == "complete" else 5.0)
        self.attribute_recalls()
        spec = self.files.spec()
        spec.status = status  # type: ignore[assignment]  # one of Status
        spec.stop_reason = reason
        spec.memory_after = memory_hash(self.user)
        self.files.save(spec)
        self.spec = spec
        if status == "complete":
            self.stores.remove()

    def attribute_recalls(self) -> None:
        """Each run's recalled insight ids and verdicts, from its arm's ledger: the recalls
        of its session, or made while it ran (sessions run one at a time)."""
        runs = self.files.runs()
        changed = False
        by_store: dict[str, list[RunRecord]] = {}
        for record in runs:
            if record.store:
                by_store.setdefault(record.store, []).append(record)
        for key, records in by_store.items():
            home = self.stores.home_of(key)
            ledger = Ledger(home / LEDGER_FILE)
            if not ledger.exists():
                continue
            recalls = ledger.recalls()
            records.sort(key=lambda r: r.started_at)
            for n, record in enumerate(records):
                end = record.ended_at.timestamp() + RECALL_GRACE
                if n + 1 < len(records):
                    end = min(end, records[n + 1].started_at.timestamp())
                ids: list[str] = []
                for entry in reversed(recalls):  # oldest first
                    mine = record.session_id and entry.session_id == record.session_id
                    if mine or record.started_at.timestamp() <= entry.at.timestamp() <= end:
                        ids += [hit.id for hit in entry.hits if hit.id not in ids]
                verdicts = (
                    [
                        v.model_dump(mode="json")
                        for v in ledger.verdicts(session_id=record.session_id)
                    ]
                    if record.session_id
                    else []
                )
                if ids != record.recalled or verdicts != record.verdicts:
                    record.recalled, record.verdicts = ids, verdicts
                    changed = True
        if changed:
            self.files.replace_runs(runs)

    def service_environment(self) -> dict[str, str]:
        """The environment the sessions' hooks and servers will have (what a service's
        identity depends on), built as for a session in a scratch home."""
        scratch = Path(tempfile.mkdtemp(prefix="mtl-trial-"))
        try:
            env = self.adapter.environment(scratch, scratch)
            self.adapter.prepare_home(scratch, scratch, env)
            return env
        finally:
            remove_tree(scratch)

    # -- one session -------------------------------------------------------------------------

    def session(self, slot: Slot, task: suites.Task, store: ArmStore | None) -> RunRecord:
        """One session of `task` in its arm, verified; its folder removed afterwards."""
        folder = Path(tempfile.mkdtemp(prefix="mtl-trial-"))
        try:
            home, work, tmp = folder / "home", folder / "work", folder / "tmp"
            for path in (home, tmp):
                path.mkdir(mode=0o700)
            suites.prepare_workdir(task, work)
            env = self.adapter.environment(home, tmp)
            self.adapter.prepare_home(home, work, env)
            if store is not None:
                self.adapter.install_memory(home, work, store.home)
                env["MTL_MCP_HOME"] = str(store.home)
            argv = [*self.adapter.argv0(), *self.adapter.session_args(task.prompt, self.spec.model)]
            started = utc_now()
            clock = time.monotonic()
            out, err, timed_out = run_session(argv, work, env, task.timeout)
            seconds = time.monotonic() - clock
            ended = utc_now()
            usage = self.adapter.parse(out, err)
            record = RunRecord(
                slot=slot.index, task=task.id, domain=task.domain, arm=slot.arm, run=slot.run,
                store=store.key if store else None, passed=False, timed_out=timed_out,
                tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, turns=usage.turns,
                tool_calls=usage.tool_calls, seconds=round(seconds, 3), started_at=started,
                ended_at=ended, session_id=usage.session_id,
            )  # fmt: skip
            if timed_out:
                record.error = f"timed out after {task.timeout:.0f} s (counted as a failure)"
            elif usage.error:  # the client's words, which may quote what it was sent
                record.passed, record.error = None, redact(usage.error)
            else:
                with _temporary_files_in(tmp):
                    verdict = suites.run_verifier(task, work)
                record.passed, record.verify_seconds = verdict.passed, round(verdict.seconds, 3)
            return record
        finally:
            remove_tree(folder)


def settle(home: Path, timeout: float = SETTLE_SECONDS) -> None:
    """Wait until the detached work the hooks of a session started for arm directory
    `home` is done: what it records in the ledger belongs to that session, and it must not
    run into the next one (or into the arm's removal)."""
    deadline = time.monotonic() + timeout
    while (left := detached_workers(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        logger.warning("the hooks' detached work for %s still runs (pids %s)", home, left)


def run_session(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> tuple[str, str, bool]:
    """Run a session in its own process group; (stdout, stderr, timed out). The group is
    killed at the deadline, on Ctrl-C, and whenever the call leaves."""
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            # In short waits: a Ctrl-C the kernel hands to another thread (LanceDB's loop)
            # only interrupts the main thread's wait when that wait ends.
            wait = min(WAKE_SECONDS, max(deadline - time.monotonic(), 0.0))
            try:
                out, err = child.communicate(timeout=wait)
                return out, err, False
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    break
        kill_group(child)
        out, err = child.communicate()
        return out, err, True
    finally:
        kill_group(child)


def kill_group(child: subprocess.Popen[str]) -> None:
    """End the session's process group: SIGTERM, then SIGKILL after a grace period."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE
        while time.monotonic() < deadline:
            try:
                os.killpg(child.pid, 0)
            except ProcessLookupError:
                break
            if child.poll() is not None and not _group_alive(child.pid):
                break
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        child.wait(timeout=KILL_GRACE)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def _temporary_files_in(folder: Path) -> Iterator[None]:
    """The verifier passes this process's TMPDIR on to the task's commands (pytest keeps
    its basetemp there, and outlives the session): point it at the session's folder, which
    is removed with the session. The trial runs one session at a time, in one thread."""
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved


def _check_socket_room(store: ArmStore) -> None:
    longest = store.home / "run" / ("0" * 12) / "service.sock"
    if len(os.fsencode(longest)) > SOCKET_PATH_MAX:
        raise InputError(
            f"the trial's memory at {store.home} is too deep for the service's socket: "
            "use a data directory with a shorter path (MTL_MCP_HOME)"
        )
