"""The built-in task suite: its shape, and proof that every task can tell a right fix from a
plausible wrong one (check_suite), that its verifier sees through edited or deleted tests,
and that a conftest.py planted in the work dir cannot pass it."""

from __future__ import annotations

import ast
import filecmp
import json
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mtl_mcp.trials.suite import (
    Task,
    _run_command,
    builtin_path,
    check_suite,
    load_suite,
    prepare_workdir,
    run_verifier,
)

DOMAINS = {
    "repo-bugfix",
    "data-parsing",
    "cli-output",
    "web-backend",
    "algorithms",
    "devops-shell",
    "config-files",
    "concurrency",
}
STARTER = builtin_path().parents[1] / "starter.jsonl"
TASKS = load_suite("builtin").tasks


def test_the_suite_has_at_least_30_tasks_over_the_eight_domains() -> None:
    suite = load_suite("builtin")
    assert suite.name == "builtin" and suite.path == builtin_path()
    assert len(suite.tasks) >= 30
    per_domain = Counter(task.domain for task in suite.tasks)
    assert set(per_domain) == DOMAINS
    assert min(per_domain.values()) >= 3, per_domain


def test_every_task_has_a_reference_a_tempting_fix_and_starter_lessons() -> None:
    """The lessons are titles of the starter pack, so that analysis can find them."""
    titles = {
        json.loads(line)["title"]
        for line in STARTER.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    for task in TASKS:
        assert task.reference is not None and task.tempting is not None, task.id
        assert task.lessons and set(task.lessons) <= titles, (task.id, set(task.lessons) - titles)
        assert 40 <= len(task.prompt) <= 400, task.id
        # each verifier runs with its own pytest.ini: no conftest.py or config of the
        # work dir (which the session may have written) applies to it
        assert task.verify == "python -m pytest -q -c .verify/pytest.ini .verify", task.id


def test_every_fix_is_a_set_of_files_that_the_repo_has() -> None:
    """reference/ and tempting/ copy over repo/: they change its files, they add none."""
    for task in TASKS:
        repo = {p.relative_to(task.path / "repo") for p in (task.path / "repo").rglob("*")}
        for overlay in (task.reference, task.tempting):
            assert overlay is not None
            files = {p.relative_to(overlay) for p in overlay.rglob("*") if p.is_file()}
            assert files and files <= repo, (task.id, overlay.name, files - repo)


def test_every_task_repo_is_small() -> None:
    for task in TASKS:
        files = [p for p in (task.path / "repo").rglob("*") if p.is_file()]
        lines = sum(len(p.read_bytes().splitlines()) for p in files)
        assert len(files) <= 10 and lines < 200, (task.id, len(files), lines)


def test_the_verifier_keeps_an_exact_copy_of_every_visible_test() -> None:
    """verify/originals holds the repo's tests as they were (what test_tests_intact.py
    compares the work dir with); the intact check is the same file in every task."""
    first = TASKS[0].path / "verify" / "test_tests_intact.py"
    for task in TASKS:
        repo, originals = task.path / "repo", task.path / "verify" / "originals"
        tests = sorted(
            p.relative_to(repo)
            for p in repo.rglob("*.py")
            if p.relative_to(repo).parts[0] == "tests" or p.name == "conftest.py"
        )
        kept = sorted(p.relative_to(originals).with_suffix("") for p in originals.rglob("*.orig"))
        assert tests and tests == kept, task.id
        for name in tests:
            assert filecmp.cmp(repo / name, originals / f"{name}.orig", shallow=False), name
        intact = task.path / "verify" / "test_tests_intact.py"
        assert filecmp.cmp(first, intact, shallow=False), task.id


def test_no_task_file_is_left_out_of_the_wheel() -> None:
    """Hatch leaves the files .gitignore names out of the wheel (a task's `build/` or
    `dist/` folder would vanish from the installed suite): no task file may match it."""
    files = [str(p) for p in builtin_path().rglob("*") if p.is_file()]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=builtin_path(),
        input="\n".join(files),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ignored.returncode in (0, 1), ignored.stderr  # 1: nothing is ignored
    assert ignored.stdout == ""
    assert len(files) > 200


@pytest.mark.slow
def test_check_suite_passes_every_builtin_task() -> None:
    """Every untouched repo fails its verifier, every reference passes it, and every tempting
    fix passes the repo's own tests but fails the verifier."""
    failed = {c.task_id: c.problems for c in check_suite(load_suite("builtin")) if not c.ok}
    assert not failed, json.dumps(failed, indent=1)[:6000]


class _Gutted(ast.NodeTransformer):
    """Every assert becomes `assert True`, every pytest.raises block a plain block."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        return ast.copy_location(ast.Assert(test=ast.Constant(True)), node)

    def visit_With(self, node: ast.With) -> ast.AST:
        self.generic_visit(node)
        if any("raises" in ast.unparse(item.context_expr) for item in node.items):
            return ast.copy_location(
                ast.If(test=ast.Constant(False), body=node.body, orelse=[]), node
            )
        return node


def gut_the_tests(workdir: Path) -> None:
    for path in (workdir / "tests").rglob("test_*.py"):
        tree = _Gutted().visit(ast.parse(path.read_text(encoding="utf-8")))
        path.write_text(ast.unparse(ast.fix_missing_locations(tree)), encoding="utf-8")


def verdict_with_gutted_tests(task: Task, root: Path) -> bool:
    """The verifier's verdict on the reference fix with the repo's tests gutted."""
    workdir = prepare_workdir(task, root / task.id, task.reference)
    gut_the_tests(workdir)
    return run_verifier(task, workdir).passed


@pytest.mark.slow
def test_edited_tests_fail_every_verifier_even_with_the_right_fix(tmp_path: Path) -> None:
    """A session that weakens the repo's tests fails, whatever else it got right."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        passed = dict(
            zip(
                [t.id for t in TASKS],
                pool.map(lambda t: verdict_with_gutted_tests(t, tmp_path), TASKS),
                strict=True,
            )
        )
    assert not [name for name, ok in passed.items() if ok]


@pytest.mark.parametrize("task_id", ["pager-last-page", "deploy-pipefail"])
def test_deleted_tests_fail_the_verifier(tmp_path: Path, task_id: str) -> None:
    task = next(t for t in TASKS if t.id == task_id)
    workdir = prepare_workdir(task, tmp_path / "w", task.reference)
    assert run_verifier(task, workdir).passed
    shutil.rmtree(workdir / "tests")
    verdict = run_verifier(task, workdir)
    assert not verdict.passed and "was deleted" in verdict.output


def test_a_planted_conftest_cannot_pass_the_verifier(tmp_path: Path) -> None:
    """A conftest.py the session writes in the work dir, making every test pass, fools the
    repo's own test run but not the verifier (its own pytest.ini keeps it out)."""
    task = next(t for t in TASKS if t.id == "pager-last-page")
    workdir = prepare_workdir(task, tmp_path / "w")
    assert not _run_command(task.tests, workdir).passed
    (workdir / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_call(item):\n"
        "    item.runtest = lambda: None\n",
        encoding="utf-8",
    )
    assert _run_command(task.tests, workdir).passed, "the cheat works where it is loaded"
    verdict = run_verifier(task, workdir)
    assert not verdict.passed
    assert "test_page_count_at_every_boundary" in verdict.output
