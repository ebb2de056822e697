"""Earlier releases of mtl-mcp, from this repository's own history, installed as users
install them, offline: for the tests of upgrades and of the README's install command.

- A release's source is `git archive` of its commit; its wheel is built once per test
  session with this venv's hatchling (no build isolation, no index: nothing downloads).
- An installation is a fresh venv of its own with mtl-mcp installed by pip from a wheel, as
  `pip install .` leaves it. Its dependencies are this test venv's packages, reached
  through a `.pth` file in the new venv (after its own site-packages, so its own mtl-mcp is
  the one imported): the same versions every release here was developed against.
- The working tree's copy is what a clone of it holds (`git ls-files`, uncommitted changes
  included), so a test of this release tests what is about to be committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The last commit of each landed release (its version string in parentheses). 0.1 needs
# fastembed's download of its model at first use, so it is not installed here.
RELEASES = {
    "0.2": "f88f4d81fb67b6702d0fcdf22f6d11d76e1696d5",  # issues 8-12 ("0.2.0")
    "0.3": "30ea2e3a1c0238f2678bdd9c83c03a7ffbf1d07a",  # issues 16-20 (still "0.2.0")
}
# What of this venv's site-packages an installation must not see: its own mtl-mcp, and
# the tools the new venv has or needs none of.
_NOT_SHARED = ("mtl_mcp", "_editable_impl_mtl_mcp", "pip", "setuptools", "_distutils_hack")


def git(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=120)


def require_commit(commit: str) -> str:
    """The full hash of `commit`; the test is skipped where the clone lacks its history
    (a shallow clone, a source archive), with the command that fetches it."""
    found = git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if found.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone: run `git fetch --unshallow`")
    return found.stdout.decode().strip()


def source_of(commit: str, dest: Path) -> Path:
    """The files of `commit`, as a clone checked out there holds them."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def working_tree_copy(dest: Path) -> Path:
    """A copy of the files a clone of this working tree holds (tracked, and new ones not
    ignored), uncommitted changes included; a plain copy of the sources without git."""
    listed = git("ls-files", "--cached", "--others", "--exclude-standard", "-z")
    if listed.returncode != 0:
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        return dest
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if source.is_file():  # a deleted file is still listed until committed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def wheel_of(source: Path, wheelhouse: Path) -> Path:
    """A wheel of the project at `source`, built offline with this venv's hatchling, in an
    empty folder `wheelhouse`."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(wheelhouse), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = wheelhouse.glob("mtl_mcp-*.whl")
    return wheel


def shared_packages(dest: Path) -> Path:
    """A folder of links to this venv's installed packages but mtl-mcp itself (and pip):
    what an installation's `.pth` (or PYTHONPATH) adds, offline."""
    dest.mkdir(parents=True)
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.suffix == ".pth" or entry.name.split("-")[0] in _NOT_SHARED:
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


@dataclass(frozen=True)
class Installation:
    """A venv of its own holding one mtl-mcp, installed from a wheel by pip."""

    root: Path

    @classmethod
    def create(cls, root: Path, packages: Path) -> Installation:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        site = root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        (site / "site-packages" / "test-dependencies.pth").write_text(f"{packages}\n")
        return cls(root)

    @property
    def mtl_mcp(self) -> str:
        return str(self.root / "bin" / "mtl-mcp")

    def pip_install(self, wheel: Path) -> subprocess.CompletedProcess[str]:
        """`pip install WHEEL` into this venv, as a user upgrades (no --force-reinstall)."""
        return subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.root / "bin" / "python"),
             "install", "--no-index", "--disable-pip-version-check", str(wheel)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    def version(self, env: dict[str, str]) -> str:
        done = subprocess.run(
            [self.mtl_mcp, "--version"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().rsplit(" ", 1)[-1]


def offline_pip_env(env: dict[str, str], packages: Path) -> dict[str, str]:
    """`env` for a pip that finds every dependency in `packages` and nothing on an index,
    and builds with the hatchling found there (as the README's command runs it in CI)."""
    return {
        **env,
        "PYTHONPATH": str(packages),
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling: "0" turns build isolation off
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    }
