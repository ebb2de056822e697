"""Task suites: load them, give each run a fresh work dir, and run the hidden verifier.

A suite is a folder of task folders (docs/trials.md, "Writing your own suite"):

    TASK/task.toml    prompt, domain, timeout, verify, setup, tests, lessons
    TASK/repo/        the work dir's initial files, committed once into a fresh git repo
    TASK/verify/      copied to WORKDIR/.verify only after the session, then `verify` runs
    TASK/reference/   optional: files that, copied over repo/, make `verify` pass
    TASK/tempting/    optional: the plausible wrong fix; it passes `tests` (the repo's own
                      visible tests) but not `verify`

Every command runs with a clean environment: no inherited PYTHONPATH or virtualenv, a
throwaway HOME, a pinned UTF-8 locale and UTC, no bytecode or pytest cache written into the
work dir, no pytest plugins loaded unless the command names them, and the interpreter
running mtl-mcp first on PATH (so `python -m pytest` finds the pytest installed beside it).
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtl_mcp.errors import ConfigError, InputError

__all__ = [
    "DEFAULT_TESTS",
    "DEFAULT_TIMEOUT",
    "DEFAULT_VERIFY",
    "Suite",
    "Task",
    "TaskCheck",
    "Verdict",
    "builtin_path",
    "check_suite",
    "check_task",
    "load_suite",
    "prepare_workdir",
    "run_verifier",
]

DEFAULT_TIMEOUT = 300.0
DEFAULT_VERIFY = "python -m pytest -q .verify"
DEFAULT_TESTS = "python -m pytest -q"
VERIFY_DIR = ".verify"
# a verifier, setup or visible-test command that runs longer than this is stopped
COMMAND_TIMEOUT = 120.0
OUTPUT_MAX = 4000  # characters of a command's output kept in a Verdict (its head and tail)
FORMAT_HELP = 'docs/trials.md, "Writing your own suite"'

_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# what a copy of a task's files leaves behind: caches a local test run may have written
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
# fixed identity and date: every prepared work dir of a task has the same commit
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "mtl-mcp trial",
    "GIT_AUTHOR_EMAIL": "trial@mtl-mcp.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "mtl-mcp trial",
    "GIT_COMMITTER_EMAIL": "trial@mtl-mcp.invalid",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


@dataclass(frozen=True)
class Task:
    """One task of a suite, as its task.toml and folders describe it."""

    id: str  # the folder name
    path: Path  # SUITE/TASK
    prompt: str
    domain: str
    timeout: float  # seconds for the session
    verify: str  # run in the work dir after the session; exit 0 = pass
    setup: str | None  # run in the work dir before the session
    lessons: tuple[str, ...]
    reference: Path | None  # SUITE/TASK/reference if present
    tempting: Path | None  # SUITE/TASK/tempting if present
    tests: str = DEFAULT_TESTS  # the repo's own visible tests, as a user would run them


@dataclass(frozen=True)
class Suite:
    """A folder of tasks, sorted by id."""

    name: str  # "builtin" or the folder's name
    path: Path
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Verdict:
    """What one verifier run said."""

    passed: bool
    seconds: float
    output: str  # the combined stdout and stderr, cut to OUTPUT_MAX characters


@dataclass(frozen=True)
class TaskCheck:
    """Whether a task can tell a right fix from a wrong one; `problems` says why not."""

    task_id: str
    ok: bool
    problems: list[str] = field(default_factory=list)


def builtin_path() -> Path:
    """The folder of the built-in suite, shipped inside the package."""
    return Path(__file__).resolve().parent.parent / "data" / "trials" / "builtin"


# --- loading -------------------------------------------------------------------------------

# key: (what it must be, a check of the value), in the order the docs list them
_KEYS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "prompt": ("a non-empty string", lambda v: isinstance(v, str) and bool(v.strip())),
    "domain": ("a non-empty string", lambda v: isinstance(v, str) and bool(v.strip())),
    "timeout": (
        "a number of seconds above 0",
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v > 0,
    ),
    "verify": ("a non-empty shell command", lambda v: isinstance(v, str) and bool(v.strip())),
    "setup": ("a non-empty shell command", lambda v: isinstance(v, str) and bool(v.strip())),
    "tests": ("a non-empty shell command", lambda v: isinstance(v, str) and bool(v.strip())),
    "lessons": (
        "a list of strings",
        lambda v: isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v),
    ),
}
_REQUIRED = ("prompt", "domain")


def load_suite(where: str | Path) -> Suite:
    """The suite `where` names: "builtin", or a folder of task folders.

    Raises InputError naming the task, the file and the fix for anything malformed."""
    if str(where) == "builtin":
        path, name = builtin_path(), "builtin"
    else:
        path = Path(where).expanduser()
        name = path.resolve().name
    if not path.is_dir():
        raise InputError(
            f"suite {where}: no such folder; pass `builtin` or a folder holding one folder "
            f"per task ({FORMAT_HELP})"
        )
    folders = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    if not folders:
        raise InputError(
            f"suite {path}: no task folders in it; each task is a folder with a task.toml, "
            f"repo/ and verify/ ({FORMAT_HELP})"
        )
    return Suite(name=name, path=path, tasks=tuple(_load_task(folder) for folder in folders))


def _load_task(folder: Path) -> Task:
    """One task folder, checked whole."""
    task_id = folder.name
    toml_path = folder / "task.toml"
    if not _TASK_ID.fullmatch(task_id):
        raise InputError(
            f"task {task_id!r} ({folder}): a task id is its folder name and may hold only "
            "letters, digits, '.', '_' and '-' (not first); rename the folder"
        )
    if not toml_path.is_file():
        raise InputError(
            f"task {task_id}: {toml_path} is missing; add one with at least `prompt` and "
            f"`domain`, or move the folder out of the suite ({FORMAT_HELP})"
        )
    try:
        values = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(
            f"task {task_id}: {toml_path} is not UTF-8 ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            f"task {task_id}: {toml_path} is not valid TOML ({exc}); fix the syntax there "
            "(strings in quotes, multi-line prompts in triple quotes)"
        ) from exc
    _check_keys(task_id, toml_path, values)
    for required in ("repo", "verify"):
        if not (folder / required).is_dir():
            what = "the work dir's initial files" if required == "repo" else "the hidden checks"
            raise InputError(
                f"task {task_id}: {folder / required} is missing; it holds {what} ({FORMAT_HELP})"
            )
    if (folder / "repo" / VERIFY_DIR).exists():
        raise InputError(
            f"task {task_id}: {folder / 'repo' / VERIFY_DIR} would show the agent the hidden "
            "checks, and the verifier replaces it anyway; move its files into verify/"
        )
    optional: dict[str, Path | None] = {}
    for name in ("reference", "tempting"):
        candidate = folder / name
        if candidate.exists() and not candidate.is_dir():
            raise InputError(
                f"task {task_id}: {candidate} is a file; make it a folder of files to copy over "
                "repo/, or remove it"
            )
        optional[name] = candidate if candidate.is_dir() else None
    return Task(
        id=task_id,
        path=folder,
        prompt=values["prompt"].strip(),
        domain=values["domain"].strip(),
        timeout=float(values.get("timeout", DEFAULT_TIMEOUT)),
        verify=values.get("verify", DEFAULT_VERIFY),
        setup=values.get("setup"),
        lessons=tuple(values.get("lessons", ())),
        reference=optional["reference"],
        tempting=optional["tempting"],
        tests=values.get("tests", DEFAULT_TESTS),
    )


def _check_keys(task_id: str, toml_path: Path, values: Mapping[str, Any]) -> None:
    """Unknown, missing and mistyped keys, each with the fix."""
    for key in values:
        if key not in _KEYS:
            near = difflib.get_close_matches(key, list(_KEYS), n=1)
            hint = f"did you mean `{near[0]}`? " if near else ""
            raise InputError(
                f"task {task_id}: {toml_path} has an unknown key `{key}`; {hint}the keys are "
                f"{', '.join(_KEYS)} ({FORMAT_HELP})"
            )
    for key in _REQUIRED:
        if key not in values:
            raise InputError(
                f'task {task_id}: {toml_path} has no `{key}`; add {key} = "..." ({FORMAT_HELP})'
            )
    for key, value in values.items():
        what, valid = _KEYS[key]
        if not valid(value):
            raise InputError(
                f"task {task_id}: {toml_path}: `{key}` must be {what}, not {value!r}; fix it there"
            )


# --- running -------------------------------------------------------------------------------


def prepare_workdir(task: Task, dest: Path, overlay: Path | None = None) -> Path:
    """A fresh work dir for one run: repo/ (then `overlay`, if given) copied to `dest`,
    committed once into a new git repo, and `setup` run. The verifier is not in it."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(
            f"task {task.id}: the work dir {dest} already exists and is not empty; "
            "pass a new or empty folder"
        )
    shutil.copytree(task.path / "repo", dest, ignore=_IGNORE, dirs_exist_ok=True, symlinks=True)
    if overlay is not None:
        shutil.copytree(overlay, dest, ignore=_IGNORE, dirs_exist_ok=True, symlinks=True)
    _commit(task, dest)
    if task.setup:
        code, output = _run(task.setup, dest, COMMAND_TIMEOUT)
        if code != 0:
            raise InputError(
                f"task {task.id}: its setup command `{task.setup}` failed "
                f"({_exit_text(code)}) in {dest}:\n{output}\nfix `setup` in "
                f"{task.path / 'task.toml'}"
            )
    return dest


def _commit(task: Task, dest: Path) -> None:
    """`git init` and one commit of everything: no git config, template or hook of the
    machine's (or of the task's files) takes part."""
    with tempfile.TemporaryDirectory(prefix="mtl-trial-git-home-") as home:
        env = {**_clean_env(home), **_GIT_ENV}
        for args in (
            ["init", "-q", "--template=", "-b", "main"],
            ["add", "-A"],
            ["commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", task.id],
        ):
            try:
                done = subprocess.run(
                    ["git", *args],
                    cwd=dest,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=COMMAND_TIMEOUT,
                )
            except FileNotFoundError as exc:
                raise ConfigError(
                    "git is not on PATH, and every trial work dir is a git repo; install git"
                ) from exc
            if done.returncode != 0:
                raise InputError(
                    f"task {task.id}: `git {' '.join(args)}` failed in {dest}: "
                    f"{(done.stderr or done.stdout).strip()}"
                )


def run_verifier(task: Task, workdir: Path, timeout: float | None = None) -> Verdict:
    """Copy verify/ to WORKDIR/.verify (replacing anything the session put there) and run
    `verify` in the work dir, clean-environment and time-limited."""
    workdir = Path(workdir)
    target = workdir / VERIFY_DIR
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(task.path / "verify", target, ignore=_IGNORE, symlinks=True)
    return _run_command(task.verify, workdir, timeout)


def _run_command(command: str, workdir: Path, timeout: float | None = None) -> Verdict:
    """Run one shell command of a task in `workdir`, clean-environment and time-limited."""
    started = time.monotonic()
    code, output = _run(command, Path(workdir), timeout or COMMAND_TIMEOUT)
    return Verdict(passed=code == 0, seconds=time.monotonic() - started, output=output)


def _run(command: str, cwd: Path, timeout: float) -> tuple[int | None, str]:
    """(exit code, or None if it ran over `timeout` and was stopped with its whole process
    group; the output, cut to size)."""
    with tempfile.TemporaryDirectory(prefix="mtl-trial-home-") as home:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=_clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raw, _ = process.communicate()
            text = raw.decode("utf-8", "replace")
            return None, _cut(f"{text}\n[stopped: it ran over its {timeout:g} s limit]")
    return process.returncode, _cut(raw.decode("utf-8", "replace"))


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop a timed-out command and everything it started."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _clean_env(home: str) -> dict[str, str]:
    """The environment every task command gets: nothing of the caller's Python setup."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    env = {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PYTEST_ADDOPTS": "-p no:cacheprovider",
        # the installed pytest plugins (hypothesis, anyio, ...) are mtl-mcp's, not the
        # task's: a verifier that needs one names it (`-p name`). Loading them all cost
        # seconds per run.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    for kept in ("TMPDIR", "SYSTEMROOT"):  # where temp files go; Windows cannot start without
        if kept in os.environ:
            env[kept] = os.environ[kept]
    return env


def _cut(text: str) -> str:
    """`text` cut to OUTPUT_MAX characters: the head (what ran) and the tail (the verdict)."""
    if len(text) <= OUTPUT_MAX:
        return text
    head, tail = OUTPUT_MAX // 4, OUTPUT_MAX * 3 // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


def _exit_text(code: int | None) -> str:
    return "it timed out" if code is None else f"exit {code}"


# --- checking ------------------------------------------------------------------------------


def check_suite(suite: Suite, *, jobs: int | None = None) -> list[TaskCheck]:
    """Per task: the untouched repo fails `verify`, the reference passes it, and the tempting
    fix passes the repo's own `tests` but fails `verify`. Tasks run `jobs` at a time (by
    default one per CPU), each in its own temp dirs; the result is in suite order."""
    workers = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(check_task, suite.tasks))


def check_task(task: Task) -> TaskCheck:
    """One task's check_suite verdict (for a caller that reports each task as it ends)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"mtl-trial-check-{task.id}-") as scratch:
        root = Path(scratch)
        try:
            untouched = run_verifier(task, prepare_workdir(task, root / "untouched"))
            if untouched.passed:
                problems.append(
                    "the untouched repo passes verify: the verifier does not check what the "
                    "task asks for"
                )
            if task.reference is not None:
                workdir = prepare_workdir(task, root / "reference", task.reference)
                verdict = run_verifier(task, workdir)
                if not verdict.passed:
                    problems.append(f"the reference fails verify:\n{verdict.output}")
            if task.tempting is not None:
                workdir = prepare_workdir(task, root / "tempting", task.tempting)
                visible = _run_command(task.tests, workdir)
                if not visible.passed:
                    problems.append(
                        f"the tempting fix fails the repo's own tests (`{task.tests}`), so it "
                        f"tempts no one:\n{visible.output}"
                    )
                if run_verifier(task, workdir).passed:
                    problems.append("the tempting fix passes verify: the verifier misses it")
        except InputError as exc:
            problems.append(str(exc))
    return TaskCheck(task_id=task.id, ok=not problems, problems=problems)
