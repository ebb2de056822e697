"""Running an assistant's command-line tool (`claude`, `codex`) as a child process.

The child gets the prompt on stdin (never our own stdin: in the MCP server that is the
JSON-RPC wire), runs in its own process group under a deadline we enforce (the CLIs have
their own retries, and Codex can wait for ever on a silent connection) and with a cap on
what it may print (OUTPUT_MAX_BYTES: a child that prints on and on is stopped, never
buffered whole), and carries
`DISTILL_CHILD_ENV` in its environment. That marker reaches every hook and MCP server the
child might start, so our own hooks can recognise a session we started and ignore it: a
distillation that queued itself for distillation would never end.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mtl_mcp.errors import DistillUnavailable
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line

DISTILL_CHILD_ENV = "MTL_MCP_DISTILL_CHILD"
PROBE_TIMEOUT = 30.0  # seconds for `--version`, `--help`, a login check
OUTPUT_MAX_BYTES = 8 * 1024 * 1024  # of stdout: far beyond any answer
STDERR_KEPT_BYTES = 64 * 1024  # of stderr: enough to say what went wrong; the rest is read


@dataclass(frozen=True)
class CliStatus:
    """Whether an assistant's CLI can distil: its path when it can, and in `detail` what was
    found (version, login) or what is wrong and how to fix it."""

    executable: str | None
    detail: str


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    killed_at_deadline: bool = False
    killed_for_output: bool = False  # it printed more than OUTPUT_MAX_BYTES

    @property
    def stopped(self) -> bool:
        return self.killed_at_deadline or self.killed_for_output


def deadline_error(what: str, timeout: float) -> DistillUnavailable:
    """The error for a child killed at its deadline."""
    return DistillUnavailable(
        f"{what} did not finish within {timeout:g} s (MTL_MCP_CLI_TIMEOUT) and was stopped; "
        "the job stays queued and is retried later"
    )


def stopped_error(what: str, timeout: float, done: ChildResult) -> DistillUnavailable:
    """The error for a child we stopped: at its deadline, or for printing too much."""
    if done.killed_for_output:
        return DistillUnavailable(
            f"{what} printed more than {OUTPUT_MAX_BYTES >> 20} MB and was stopped (an answer "
            "is a few KB); the job stays queued and is retried later"
        )
    return deadline_error(what, timeout)


def snippet(text: str) -> str:
    """A child's output for an error message or a log: one line, short, secrets redacted."""
    return redact(one_line(text, 300)) or "no output"


def reported_tokens(counts: object, *keys: str) -> int:
    """The sum of the integer fields `keys` of a usage object a CLI printed (anything that
    is not a count counts 0)."""
    if not isinstance(counts, dict):
        return 0
    values = [counts.get(key) for key in keys]
    return sum(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)


def is_distill_child() -> bool:
    """Whether this process runs inside a child that mtl-mcp started to distil a session."""
    return bool(os.environ.get(DISTILL_CHILD_ENV))


def run_child(
    argv: list[str],
    *,
    what: str,
    timeout: float,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ChildResult:
    """Run `argv` to completion within `timeout` seconds; `what` names it in errors.

    On the deadline, or once stdout passes OUTPUT_MAX_BYTES, the whole process group is
    killed and the result says so (the caller decides what a killed call cost); a program
    that cannot be started is DistillUnavailable. Output is decoded as UTF-8, bad bytes
    replaced; of stderr the first STDERR_KEPT_BYTES are kept.
    """
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **(env or {}), DISTILL_CHILD_ENV: "1"},
            start_new_session=True,  # its own process group, killed as one
        )
    except OSError as exc:
        raise DistillUnavailable(f"cannot start {what} ({argv[0]}: {exc})") from exc
    try:
        stdout, stderr, stopped = _exchange(child, stdin.encode("utf-8", "replace"), timeout)
    except BaseException:  # interrupted: never leave the child running
        _kill_group(child)
        raise
    if stopped is not None:
        _kill_group(child)
        return ChildResult(
            child.returncode,
            "",
            "",
            killed_at_deadline=stopped == "deadline",
            killed_for_output=stopped == "output",
        )
    return ChildResult(
        child.returncode,
        stdout.decode("utf-8", errors="replace"),
        stderr.decode("utf-8", errors="replace"),
    )


def _exchange(
    child: subprocess.Popen[bytes], stdin: bytes, timeout: float
) -> tuple[bytes, bytes, str | None]:
    """Write `stdin` to the child and read its output until it closes both streams, within
    `timeout` and the caps: (stdout, stderr, None), or why it must be stopped ("deadline",
    "output")."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        for stream in (child.stdout, child.stderr):
            os.set_blocking(stream.fileno(), False)
            selector.register(stream, selectors.EVENT_READ)
        pending = memoryview(stdin)
        if pending:
            os.set_blocking(child.stdin.fileno(), False)
            selector.register(child.stdin, selectors.EVENT_WRITE)
        else:
            child.stdin.close()
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "deadline"
            for key, _ in selector.select(left):
                ready = key.fileobj
                if ready is child.stdin:
                    try:
                        pending = pending[os.write(child.stdin.fileno(), pending[:65536]) :]
                    except BrokenPipeError:  # it stopped reading: its output says why
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(child.stdin)
                        child.stdin.close()
                    continue
                assert ready is child.stdout or ready is child.stderr
                try:
                    chunk = os.read(
                        child.stdout.fileno() if ready is child.stdout else child.stderr.fileno(),
                        65536,
                    )
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(ready)
                elif ready is child.stdout:
                    out += chunk
                    if len(out) > OUTPUT_MAX_BYTES:
                        return bytes(out), bytes(err), "output"
                elif len(err) < STDERR_KEPT_BYTES:
                    err += chunk[: STDERR_KEPT_BYTES - len(err)]
    try:
        child.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:  # it closed its output but runs on
        return bytes(out), bytes(err), "deadline"
    return bytes(out), bytes(err), None


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def probe(executable: str, *args: str, env: Mapping[str, str] | None = None) -> ChildResult:
    """A quick informational command (`--version`, `--help`, a login check)."""
    what = " ".join([Path(executable).name, *args])
    done = run_child([executable, *args], what=what, timeout=PROBE_TIMEOUT, env=env)
    if done.stopped:
        raise stopped_error(what, PROBE_TIMEOUT, done)
    return done
