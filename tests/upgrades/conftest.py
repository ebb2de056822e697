"""What the upgrade and install tests share across a session: this venv's packages for
offline installs, and the wheels of this working tree and of earlier releases (each built
once, a few seconds apiece)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.releases import (
    RELEASES,
    require_commit,
    shared_packages,
    source_of,
    wheel_of,
    working_tree_copy,
)


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_packages(tmp_path_factory.mktemp("packages") / "site-packages")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The wheel of a release ("0.2", "0.3") or of this working tree ("head")."""
    built: dict[str, Path] = {}

    def of(release: str) -> Path:
        if release not in built:
            root = tmp_path_factory.mktemp(f"release-{release}")
            if release == "head":
                source = working_tree_copy(root / "source")
            else:
                source = source_of(require_commit(RELEASES[release]), root / "source")
            built[release] = wheel_of(source, root / "wheels")
        return built[release]

    return of
