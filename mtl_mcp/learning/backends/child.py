"""Running an assistant's command-line tool (`claude`, `codex`) as a child process.

The child gets the prompt on stdin (never our own stdin: in the MCP server that is the
JSON-RPC wire), runs in its own process group under a deadline we enforce (the CLIs have
their own retries, and Codex can wait for ever on a silent connection), and carries
`DISTILL_CHILD_ENV` in its environment. That marker reaches every hook and MCP server the
child might start, so our own hooks can recognise a session we started and ignore it: a
distillation that queued itself for distillation would never end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mtl_mcp.errors import DistillUnavailable
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line

DISTILL_CHILD_ENV = "MTL_MCP_DISTILL_CHILD"
PROBE_TIMEOUT = 30.0  # seconds for `--version`, `--help`, a login check


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


def deadline_error(what: str, timeout: float) -> DistillUnavailable:
    """The error for a child killed at its deadline."""
    return DistillUnavailable(
        f"{what} did not finish within {timeout:g} s (MTL_MCP_CLI_TIMEOUT) and was stopped; "
        "the job stays queued and is retried later"
    )


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

    On the deadline the whole process group is killed and the result says so (the caller
    decides what a killed call cost); a program that cannot be started is DistillUnavailable.
    Output is decoded as UTF-8, bad bytes replaced.
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
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    except OSError as exc:
        raise DistillUnavailable(f"cannot start {what} ({argv[0]}: {exc})") from exc
    try:
        stdout, stderr = child.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        return ChildResult(child.returncode, "", "", killed_at_deadline=True)
    except BaseException:  # interrupted: never leave the child running
        _kill_group(child)
        raise
    return ChildResult(child.returncode, stdout, stderr)


def _kill_group(child: subprocess.Popen[str]) -> None:
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
    if done.killed_at_deadline:
        raise deadline_error(what, PROBE_TIMEOUT)
    return done
