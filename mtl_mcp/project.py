"""Project identity: which project a session belongs to.

Two folders with the same name must never share an identity (peers' users lost memories
that way), so the identity comes from the git root: its `origin` remote URL when there is
one (the same repository cloned twice is one project), else the root's absolute path.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProjectRef:
    """A project's stable identity and the short name a person would call it."""

    id: str
    name: str


def _git_dir(root: Path) -> Path | None:
    """The .git directory of a work tree (following a worktree's `gitdir:` file)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = (root / text.removeprefix("gitdir:").strip()).resolve()
            # A linked worktree's config lives in the main repository's git dir.
            common = target / "commondir"
            if common.is_file():
                return (target / common.read_text(encoding="utf-8").strip()).resolve()
            return target
    return None


def normalize_remote(url: str) -> str:
    """`git@host:Org/Repo.git` or `https://u:pw@host/org/repo` -> `host/org/repo`."""
    url = url.strip()
    if match := re.match(r"^[\w.-]+@([\w.-]+):(.+)$", url):  # scp-like ssh syntax
        host, path = match.groups()
    else:
        url = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url, flags=re.I)
        url = re.sub(r"^[^@/]*@", "", url)  # credentials never become part of an identity
        host, _, path = url.partition("/")
        host = host.split(":")[0]
    path = re.sub(r"\.git/?$", "", path.strip("/"))
    return f"{host.lower()}/{path.lower()}" if path else host.lower()


def _origin_url(git_dir: Path) -> str | None:
    config = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        config.read(git_dir / "config", encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    section = 'remote "origin"'
    if config.has_section(section) and config.has_option(section, "url"):
        return config.get(section, "url")
    return None


def resolve_project(path: Path | str) -> ProjectRef:
    """The identity of the project containing `path` (a git work tree or a plain folder).

    A server resolves the same few folders on every call (1.4 ms for a git worktree, most
    of it parsing its config): the answer is remembered with the times of everything it
    read, and worked out again when one of them changed."""
    start = Path(path).expanduser().resolve()
    cached = _RESOLVED.get(start)
    if cached is not None and cached[1] == _stamps(cached[0]):
        return cached[2]
    ref, read = _resolve(start)
    _RESOLVED[start] = (read, _stamps(read), ref)
    return ref


_RESOLVED: dict[Path, tuple[list[Path], tuple[tuple[int, int] | None, ...], ProjectRef]] = {}


def _stamps(paths: list[Path]) -> tuple[tuple[int, int] | None, ...]:
    """The modification times and sizes of `paths` (None for a missing one): a folder's
    change when an entry such as `.git` appears in it or goes."""
    found: list[tuple[int, int] | None] = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            found.append(None)
        else:
            found.append((info.st_mtime_ns, info.st_size))
    return tuple(found)


def _resolve(start: Path) -> tuple[ProjectRef, list[Path]]:
    """`resolve_project`'s answer for a resolved folder, and every path it read."""
    read: list[Path] = []
    for folder in (start, *start.parents):
        read.append(folder)
        git_dir = _git_dir(folder)
        if git_dir is None:
            continue
        read += [folder / ".git", git_dir / "config"]
        if origin := _origin_url(git_dir):
            identity = normalize_remote(origin)
            return ProjectRef(id=identity, name=identity.rsplit("/", 1)[-1] or folder.name), read
        return ProjectRef(id=str(folder), name=folder.name), read
    return ProjectRef(id=str(start), name=start.name), read


def current_project(
    explicit: str | None = None, project_dir: str | None = None, cwd: str | None = None
) -> ProjectRef | None:
    """The project named by the caller, else the client's project dir (Claude Code's
    `$CLAUDE_PROJECT_DIR` of the window asking), else None.

    An explicit value that is an existing folder is resolved like a path, a relative one
    from the caller's folder `cwd` (never this process's: the shared service runs in the
    data directory, and an HTTP server's folder says nothing of its clients'); any other
    value is taken as an identity as given.
    """
    if explicit:
        named = Path(explicit).expanduser()
        folder = named if named.is_absolute() else Path(cwd, named) if cwd else None
        if folder is not None and folder.is_dir():
            return resolve_project(folder)
        return ProjectRef(id=explicit, name=explicit.rsplit("/", 1)[-1])
    if project_dir:
        return resolve_project(project_dir)
    return None


def is_no_project(folder: Path | str) -> bool:
    """Whether a folder is nobody's project: the filesystem root or the home folder (where
    Claude Desktop, for one, starts its servers)."""
    path = Path(folder).expanduser().resolve()
    return path == Path(path.anchor) or path == Path.home().resolve()


def window_project(
    explicit: str | None = None,
    project_dir: str | None = None,
    root: str | None = None,
    cwd: str | None = None,
) -> ProjectRef | None:
    """The project a request is about, resolved the same way by every door (CLI, MCP over
    stdio or HTTP, the service, the hooks): the caller's argument, else the client's
    project dir ($CLAUDE_PROJECT_DIR), else its first file root (MCP roots), else the
    folder the client runs in, unless that is nobody's project (`is_no_project`)."""
    if found := current_project(explicit, project_dir, cwd):
        return found
    for folder in (root, cwd):
        if folder and not is_no_project(folder):
            return resolve_project(folder)
    return None
