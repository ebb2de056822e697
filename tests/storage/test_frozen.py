"""A frozen memory (`read_only`, a trial's snapshot) takes no write through any path of the
table: the meta table's compare-and-swap (the team pool's consolidation lease) included."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.errors import StoreReadOnly
from tests.conftest import distinct_lessons


def test_a_frozen_store_refuses_every_meta_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    writable = Memory(load_settings(home, starter=False))
    writable.record(distinct_lessons(3))
    writable.close()
    frozen = Memory(load_settings(home, starter=False, read_only=True))
    try:
        frozen.table.open()
        with pytest.raises(StoreReadOnly):
            frozen.table.set_meta({"k": "v"})
        with pytest.raises(StoreReadOnly):
            frozen.table.meta_swap("lease", None, "me")
        assert frozen.table.meta_value("lease") is None
    finally:
        frozen.close()
