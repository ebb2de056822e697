"""Project identity from the git root, never the folder basename alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtl_mcp.project import current_project, normalize_remote, resolve_project, window_project


def make_repo(path: Path, origin: str | None = None) -> Path:
    (path / ".git").mkdir(parents=True)
    config = "[core]\n\tbare = false\n"
    if origin:
        config += (
            f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (path / ".git" / "config").write_text(config, encoding="utf-8")
    return path


def test_same_folder_name_in_two_places_are_different_projects(tmp_path: Path) -> None:
    """Two repos named 'api' without remotes get different identities."""
    a = resolve_project(make_repo(tmp_path / "work" / "api"))
    b = resolve_project(make_repo(tmp_path / "personal" / "api"))
    assert a.name == b.name == "api" and a.id != b.id


def test_clones_of_one_remote_share_an_identity(tmp_path: Path) -> None:
    """ssh and https clones of one repository are the same project; credentials are dropped."""
    a = make_repo(tmp_path / "one", "git@github.com:Acme/Api.git")
    b = make_repo(tmp_path / "two", "https://token:secret@github.com/acme/api")
    assert resolve_project(a).id == resolve_project(b).id == "github.com/acme/api"


def test_subfolders_resolve_to_the_git_root(tmp_path: Path) -> None:
    """A path deep inside a work tree belongs to the repository's project."""
    root = make_repo(tmp_path / "repo", "ssh://git@gitlab.example.com:2222/team/tool.git")
    deep = root / "src" / "pkg"
    deep.mkdir(parents=True)
    assert resolve_project(deep).id == "gitlab.example.com/team/tool"


def test_a_remembered_identity_follows_a_new_repository_and_a_new_remote(tmp_path: Path) -> None:
    """resolve_project remembers its answers (a server asks on every call), yet a folder that
    becomes a repository, or a repository that gains a remote, resolves anew."""
    folder = tmp_path / "tool"
    (folder / "src").mkdir(parents=True)
    assert resolve_project(folder / "src").id == str(folder / "src")
    make_repo(folder)
    assert resolve_project(folder / "src").id == str(folder)
    config = folder / ".git" / "config"
    config.write_text(config.read_text() + '[remote "origin"]\n\turl = git@host:org/tool.git\n')
    assert resolve_project(folder / "src").id == "host/org/tool"


def test_worktree_gitdir_file_is_followed(tmp_path: Path) -> None:
    """A linked worktree (a .git file) finds the main repository's remote."""
    main = make_repo(tmp_path / "main", "https://github.com/acme/api.git")
    linked_git = main / ".git" / "worktrees" / "feature"
    linked_git.mkdir(parents=True)
    (linked_git / "commondir").write_text("../..\n", encoding="utf-8")
    tree = tmp_path / "feature"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {linked_git}\n", encoding="utf-8")
    assert resolve_project(tree).id == "github.com/acme/api"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Org/Repo.git", "github.com/org/repo"),
        ("https://github.com/org/repo/", "github.com/org/repo"),
        ("ssh://git@host:2222/a/b.git", "host/a/b"),
    ],
)
def test_normalize_remote(url: str, expected: str) -> None:
    """Remote URLs normalize to host/path."""
    assert normalize_remote(url) == expected


def test_current_project_prefers_argument_then_the_windows_project_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit project wins; otherwise the window's project dir; never this process's
    own CLAUDE_PROJECT_DIR (a shared service serves many windows)."""
    repo = make_repo(tmp_path / "r", "https://github.com/acme/r")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(repo))
    assert current_project() is None
    assert current_project(None, str(repo)).id == "github.com/acme/r"
    assert current_project("someone/else", str(repo)).id == "someone/else"


def test_a_relative_project_is_the_callers_folder_not_this_processs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`project="."` names the caller's folder; with no folder known (HTTP) it is taken as
    an identity as given, never resolved against the server's own working directory."""
    repo = make_repo(tmp_path / "r", "https://github.com/acme/r")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # this process's folder: the service's, say
    assert current_project(".", cwd=str(repo)).id == "github.com/acme/r"
    (repo / "sub").mkdir()
    assert window_project("..", cwd=str(repo / "sub")).id == "github.com/acme/r"
    assert current_project(".").id == "."
