"""Task suites: load_suite's errors and defaults, prepare_workdir, run_verifier, check_suite,
on small suites written here (the built-in suite has its own test)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mtl_mcp.errors import InputError
from mtl_mcp.trials.suite import (
    DEFAULT_TESTS,
    DEFAULT_TIMEOUT,
    DEFAULT_VERIFY,
    Task,
    check_suite,
    load_suite,
    prepare_workdir,
    run_verifier,
)

TOML = 'prompt = "make add() add"\ndomain = "algorithms"\nverify = "python .verify/check.py"\n'
CHECK = (
    "import os, sys\nsys.path.insert(0, os.getcwd())\nimport calc\n"
    "sys.exit(0 if calc.add(2, 3) == 5 and calc.add(-1, 1) == 0 else 1)\n"
)
VISIBLE = "import calc\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"


def write_task(
    suite: Path,
    name: str = "add",
    *,
    toml: str = TOML,
    code: str = "def add(a, b):\n    return a - b\n",
    reference: str | None = "def add(a, b):\n    return a + b\n",
    tempting: str | None = "def add(a, b):\n    return 5\n",
) -> Path:
    """A task: calc.add is wrong; its reference fixes it, its tempting fix returns 5."""
    task = suite / name
    (task / "repo").mkdir(parents=True)
    (task / "verify").mkdir()
    (task / "task.toml").write_text(toml, encoding="utf-8")
    (task / "repo" / "calc.py").write_text(code, encoding="utf-8")
    (task / "repo" / "test_calc.py").write_text(VISIBLE, encoding="utf-8")
    (task / "verify" / "check.py").write_text(CHECK, encoding="utf-8")
    for folder, text in (("reference", reference), ("tempting", tempting)):
        if text is not None:
            (task / folder).mkdir()
            (task / folder / "calc.py").write_text(text, encoding="utf-8")
    return task


def load_error(suite: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_suite(suite)
    return str(caught.value)


def test_a_task_loads_with_the_documented_defaults(tmp_path: Path) -> None:
    """Only prompt and domain are required; the rest take the defaults docs/trials.md names."""
    write_task(tmp_path / "s", toml='prompt = "  fix it  "\ndomain = "algorithms"\n')
    (tmp_path / "s" / "add" / "reference").rename(tmp_path / "s" / "add" / "elsewhere")
    suite = load_suite(tmp_path / "s")
    (task,) = suite.tasks
    assert suite.name == "s"
    assert (task.id, task.prompt, task.domain) == ("add", "fix it", "algorithms")
    assert (task.timeout, task.verify, task.tests) == (
        DEFAULT_TIMEOUT,
        DEFAULT_VERIFY,
        DEFAULT_TESTS,
    )
    assert (task.setup, task.lessons, task.reference) == (None, (), None)
    assert task.tempting == tmp_path / "s" / "add" / "tempting"


def test_every_key_is_read_and_tasks_are_sorted_by_id(tmp_path: Path) -> None:
    toml = (
        'prompt = """two\nlines"""\ndomain = "web"\ntimeout = 60\nverify = "make check"\n'
        'setup = "true"\ntests = "make test"\nlessons = ["Reproduce the failure"]\n'
    )
    for name in ("b-task", "a-task"):
        write_task(tmp_path, name, toml=toml)
    (tmp_path / ".hidden").mkdir()  # hidden and _private folders are not tasks
    (tmp_path / "_shared").mkdir()
    suite = load_suite(str(tmp_path))
    assert [t.id for t in suite.tasks] == ["a-task", "b-task"]
    task = suite.tasks[0]
    assert (task.prompt, task.timeout, task.verify, task.setup) == (
        "two\nlines",
        60.0,
        "make check",
        "true",
    )
    assert (task.tests, task.lessons) == ("make test", ("Reproduce the failure",))


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('prompt = "x\ndomain = "y"\n', "is not valid TOML"),
        (
            'prompt = "x"\ndomain = "y"\ntimout = 30\n',
            "unknown key `timout`; did you mean `timeout`?",
        ),
        (
            'prompt = "x"\ndomain = "y"\ncolour = 1\n',
            "unknown key `colour`; the keys are prompt, domain",
        ),
        ('domain = "y"\n', 'has no `prompt`; add prompt = "..."'),
        ('prompt = "x"\n', "has no `domain`"),
        (
            'prompt = "x"\ndomain = "y"\ntimeout = "300"\n',
            "`timeout` must be a number of seconds above 0, not '300'",
        ),
        (
            'prompt = "x"\ndomain = "y"\ntimeout = 0\n',
            "`timeout` must be a number of seconds above 0",
        ),
        ('prompt = "x"\ndomain = "y"\ntimeout = true\n', "`timeout` must be a number"),
        (
            'prompt = "x"\ndomain = "y"\nlessons = "a"\n',
            "`lessons` must be a list of strings, not 'a'",
        ),
        ('prompt = "x"\ndomain = "y"\nlessons = [1]\n', "`lessons` must be a list of strings"),
        ('prompt = ""\ndomain = "y"\n', "`prompt` must be a non-empty string"),
        (
            'prompt = "x"\ndomain = "y"\nverify = ["pytest"]\n',
            "`verify` must be a non-empty shell command",
        ),
        ('prompt = "x"\ndomain = "y"\nsetup = 3\n', "`setup` must be a non-empty shell command"),
    ],
)
def test_a_bad_task_toml_is_named_with_its_fix(tmp_path: Path, toml: str, expected: str) -> None:
    """Each error names the task and its file, says what is wrong and what to write."""
    write_task(tmp_path, "broken", toml=toml)
    message = load_error(tmp_path)
    assert message.startswith("task broken: ")
    assert str(tmp_path / "broken" / "task.toml") in message
    assert expected in message


def test_a_task_toml_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    task = write_task(tmp_path, "latin")
    (task / "task.toml").write_bytes('prompt = "café"\ndomain = "x"\n'.encode("latin-1"))
    assert "is not UTF-8" in load_error(tmp_path)
    assert "save it as UTF-8" in load_error(tmp_path)


@pytest.mark.parametrize("missing", ["repo", "verify", "task.toml"])
def test_a_missing_part_of_a_task_is_named(tmp_path: Path, missing: str) -> None:
    task = write_task(tmp_path, "gappy")
    target = task / missing
    if target.is_dir():
        for child in target.iterdir():
            child.unlink()
        target.rmdir()
    else:
        target.unlink()
    message = load_error(tmp_path)
    assert message.startswith("task gappy: ") and str(target) in message
    assert "is missing" in message
    assert "Writing your own suite" in message


def test_a_reference_that_is_a_file_is_refused(tmp_path: Path) -> None:
    task = write_task(tmp_path, "odd", reference=None)
    (task / "reference").write_text("x", encoding="utf-8")
    assert "reference is a file; make it a folder" in load_error(tmp_path)


def test_a_repo_that_ships_its_verifier_is_refused(tmp_path: Path) -> None:
    """A repo/.verify would be in the work dir during the session: the checks would not be
    hidden."""
    task = write_task(tmp_path, "leaky")
    (task / "repo" / ".verify").mkdir()
    assert "would show the agent the hidden checks" in load_error(tmp_path)


def test_a_folder_name_that_cannot_be_a_task_id_is_refused(tmp_path: Path) -> None:
    write_task(tmp_path, "my task")
    assert "rename the folder" in load_error(tmp_path)


def test_a_missing_or_empty_suite_says_what_a_suite_is(tmp_path: Path) -> None:
    assert "no such folder; pass `builtin` or a folder" in load_error(tmp_path / "nowhere")
    assert "no task folders in it" in load_error(tmp_path)


def one_task(tmp_path: Path, toml: str = TOML) -> Task:
    write_task(tmp_path / "suite", toml=toml)
    return load_suite(tmp_path / "suite").tasks[0]


def git(workdir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=workdir, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_work_dir_is_the_repo_committed_once_without_the_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No global git config is needed (HOME is empty), the commit is the same for every
    work dir of the task, and nothing of verify/ is in it."""
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    task = one_task(tmp_path)
    (task.path / "repo" / "__pycache__").mkdir()  # a local run's cache is not copied
    (task.path / "repo" / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")
    first = prepare_workdir(task, tmp_path / "one")
    second = prepare_workdir(task, tmp_path / "two")
    assert sorted(p.name for p in first.iterdir()) == [".git", "calc.py", "test_calc.py"]
    assert git(first, "status", "--porcelain") == ""
    assert git(first, "rev-list", "--count", "HEAD") == "1"
    assert git(first, "log", "-1", "--format=%an <%ae> %ad", "--date=iso") == (
        "mtl-mcp trial <trial@mtl-mcp.invalid> 2000-01-01 00:00:00 +0000"
    )
    assert git(first, "rev-parse", "HEAD") == git(second, "rev-parse", "HEAD")


def test_an_overlay_is_copied_over_the_repo_before_the_commit(tmp_path: Path) -> None:
    task = one_task(tmp_path)
    assert task.reference is not None
    workdir = prepare_workdir(task, tmp_path / "w", task.reference)
    assert "a + b" in (workdir / "calc.py").read_text(encoding="utf-8")
    assert (workdir / "test_calc.py").is_file()
    assert git(workdir, "status", "--porcelain") == ""


def test_setup_runs_in_the_work_dir_and_a_failing_one_is_named(tmp_path: Path) -> None:
    task = one_task(tmp_path, toml=TOML + 'setup = "echo made > made.txt"\n')
    workdir = prepare_workdir(task, tmp_path / "w")
    assert (workdir / "made.txt").read_text(encoding="utf-8") == "made\n"
    failing = dataclasses.replace(task, setup="echo no data >&2; exit 3")
    with pytest.raises(InputError) as caught:
        prepare_workdir(failing, tmp_path / "w2")
    message = str(caught.value)
    assert message.startswith("task add: its setup command") and "exit 3" in message
    assert "no data" in message and "fix `setup` in" in message


def test_a_work_dir_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    task = one_task(tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="already exists and is not empty"):
        prepare_workdir(task, tmp_path / "busy")
    assert (tmp_path / "busy" / "file").read_text(encoding="utf-8") == "mine"
    (tmp_path / "empty").mkdir()
    assert prepare_workdir(task, tmp_path / "empty") == tmp_path / "empty"


def test_the_verifier_arrives_only_when_it_runs(tmp_path: Path) -> None:
    """It replaces whatever the session left at .verify, and says pass or fail."""
    task = one_task(tmp_path)
    workdir = prepare_workdir(task, tmp_path / "w")
    assert not (workdir / ".verify").exists()
    (workdir / ".verify").mkdir()
    (workdir / ".verify" / "check.py").write_text("raise SystemExit(0)\n", encoding="utf-8")
    verdict = run_verifier(task, workdir)
    assert not verdict.passed
    assert (workdir / ".verify" / "check.py").read_text(encoding="utf-8") == CHECK
    (workdir / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    assert run_verifier(task, workdir).passed


def test_the_verifier_runs_in_a_clean_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No PYTHONPATH, HOME or secrets of the caller, no bytecode written, no pytest plugins
    loaded unasked, a pinned locale and zone, and `python` is the interpreter running
    mtl-mcp."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "shadow"))
    monkeypatch.setenv("SECRET_TOKEN", "do-not-pass")
    probe = (
        "import json, os, sys\n"
        "keys = ['PYTHONPATH', 'PYTHONDONTWRITEBYTECODE', 'HOME', 'TZ', 'LC_ALL', 'SECRET_TOKEN',"
        " 'PYTEST_DISABLE_PLUGIN_AUTOLOAD']\n"
        "print(json.dumps({k: os.environ.get(k) for k in keys} | {'exe': sys.executable}))\n"
    )
    task = one_task(tmp_path, toml=TOML.replace("check.py", "probe.py"))
    (task.path / "verify" / "probe.py").write_text(probe, encoding="utf-8")
    verdict = run_verifier(task, prepare_workdir(task, tmp_path / "w"))
    assert verdict.passed, verdict.output
    seen = json.loads(verdict.output)
    assert seen["PYTHONPATH"] is None and seen["SECRET_TOKEN"] is None
    assert seen["PYTHONDONTWRITEBYTECODE"] == seen["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert (seen["TZ"], seen["LC_ALL"]) == ("UTC", "C.UTF-8")
    assert seen["HOME"] != os.environ["HOME"]
    assert Path(seen["exe"]).parent == Path(sys.executable).parent


def test_a_verifier_over_its_time_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    task = one_task(
        tmp_path, toml=TOML.replace("python .verify/check.py", "sleep 60 & echo $! > child; wait")
    )
    workdir = prepare_workdir(task, tmp_path / "w")
    verdict = run_verifier(task, workdir, timeout=1)
    assert not verdict.passed
    assert "ran over its 1 s limit" in verdict.output
    child = int((workdir / "child").read_text(encoding="utf-8"))
    assert not running(child)


def running(pid: int) -> bool:
    """Whether `pid` runs: a killed child nobody reaped (this machine's init does not) is a
    zombie, which runs no more."""
    if not Path("/proc").is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_long_output_keeps_its_head_and_tail(tmp_path: Path) -> None:
    noisy = "python -c \"print('first'); print('x' * 100000); print('last')\"; exit 1"
    task = one_task(
        tmp_path, toml=TOML.replace("python .verify/check.py", noisy.replace('"', '\\"'))
    )
    verdict = run_verifier(task, prepare_workdir(task, tmp_path / "w"))
    assert not verdict.passed
    assert verdict.output.startswith("first") and verdict.output.rstrip().endswith("last")
    assert "characters cut" in verdict.output and len(verdict.output) < 4200


def test_check_suite_passes_a_sound_task_and_names_each_fault(tmp_path: Path) -> None:
    """Untouched passes verify, a reference that fails, a tempting fix that fails the
    visible tests or that passes verify: each is one problem of its task."""
    suite = tmp_path / "suite"
    write_task(suite, "a-sound")
    write_task(suite, "b-trivial", code="def add(a, b):\n    return a + b\n")
    write_task(suite, "c-bad-reference", reference="def add(a, b):\n    return 5\n")
    write_task(suite, "d-untempting", tempting="def add(a, b):\n    return 0\n")
    write_task(suite, "e-right-tempting", tempting="def add(a, b):\n    return b + a\n")
    write_task(suite, "f-bare", reference=None, tempting=None)
    checks = {c.task_id: c for c in check_suite(load_suite(suite), jobs=2)}
    assert list(checks) == [
        "a-sound",
        "b-trivial",
        "c-bad-reference",
        "d-untempting",
        "e-right-tempting",
        "f-bare",
    ]
    assert checks["a-sound"].ok and checks["a-sound"].problems == []
    assert checks["f-bare"].ok
    assert [p.split(":")[0] for p in checks["b-trivial"].problems] == [
        "the untouched repo passes verify"
    ]
    assert checks["c-bad-reference"].problems[0].startswith("the reference fails verify")
    assert (
        checks["d-untempting"].problems[0].startswith("the tempting fix fails the repo's own tests")
    )
    assert checks["e-right-tempting"].problems == [
        "the tempting fix passes verify: the verifier misses it"
    ]
    assert not any(c.ok for name, c in checks.items() if name not in ("a-sound", "f-bare"))


def test_check_suite_reports_a_failing_setup_as_the_tasks_problem(tmp_path: Path) -> None:
    write_task(tmp_path / "suite", toml=TOML + 'setup = "exit 4"\n')
    (check,) = check_suite(load_suite(tmp_path / "suite"))
    assert not check.ok and "exit 4" in check.problems[0]


def suite_format_section() -> str:
    """The docs' "Writing your own suite": in docs/trials.md once merged there, else in its
    own page."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in (docs / "trials.md", docs / "trials-suite-format.md"):
        if page.is_file() and "# Writing your own suite" in (text := page.read_text("utf-8")):
            return text[text.index("# Writing your own suite") :]
    raise AssertionError("no docs page has a section 'Writing your own suite'")


def test_the_docs_worked_example_is_a_sound_suite(tmp_path: Path) -> None:
    """Each file the worked example shows, written out, makes a task check_suite passes."""
    example = suite_format_section().split("## A worked example", 1)[1]
    files = re.findall(r"^`([^`]+)`[^\n]*:\n\n```\w*\n(.*?)^```", example, re.S | re.M)
    assert {name for name, _ in files} >= {"task.toml", "repo/wc.py", "verify/pytest.ini"}
    for name, body in files:
        path = tmp_path / "my-suite" / "word-count" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    (check,) = check_suite(load_suite(tmp_path / "my-suite"))
    assert check.ok, check.problems
