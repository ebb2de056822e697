"""mtl-mcp: a cross-project memory of abstract coding insights, served over MCP.

The library in one object:

    from mtl_mcp import Memory
    memory = Memory()                       # the user's store (settings from env / config)
    memory.record([{"title": ..., "description": ..., "content": ...}])
    hits = memory.recall("First I will reproduce the failure. Then ...")

Every name in `__all__` is the public API; modules are implementation. Names load lazily,
so `import mtl_mcp` stays cheap for the hooks and the MCP handshake: LanceDB, numpy and the
model load only when a `Memory` is first used.
"""

from __future__ import annotations

from mtl_mcp.version import __version__ as __version__

# Not `typing.TYPE_CHECKING`: importing typing would cost every hook a few milliseconds (type
# checkers treat any `TYPE_CHECKING` as true).
TYPE_CHECKING = False

# The public names, by the module that defines them.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "mtl_mcp.memory": ("ImportReport", "LabelledVectors", "Memory"),
    "mtl_mcp.config": ("Settings", "load_settings"),
    "mtl_mcp.project": ("ProjectRef", "resolve_project"),
    "mtl_mcp.schemas": (
        "Insight",
        "InsightDraft",
        "Provenance",
        "RecallHit",
        "RecordResult",
        "ShareResult",
    ),
    "mtl_mcp.server.app": ("build_server",),
    "mtl_mcp.errors": (
        "BudgetExceeded",
        "BudgetTooSmall",
        "ConfigError",
        "DistillError",
        "DistillUnavailable",
        "EmbeddingError",
        "InputError",
        "MtlError",
        "NotFoundError",
        "Retryable",
        "StoreBusy",
        "StoreDamaged",
        "StoreError",
        "StoreReadOnly",
        "StoreUnavailable",
        "TranscriptError",
        "UnusableOutput",
    ),
}
_HOMES = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:  # the same names, for type checkers (at run time they load lazily)
    from mtl_mcp.config import Settings as Settings
    from mtl_mcp.config import load_settings as load_settings
    from mtl_mcp.errors import BudgetExceeded as BudgetExceeded
    from mtl_mcp.errors import BudgetTooSmall as BudgetTooSmall
    from mtl_mcp.errors import ConfigError as ConfigError
    from mtl_mcp.errors import DistillError as DistillError
    from mtl_mcp.errors import DistillUnavailable as DistillUnavailable
    from mtl_mcp.errors import EmbeddingError as EmbeddingError
    from mtl_mcp.errors import InputError as InputError
    from mtl_mcp.errors import MtlError as MtlError
    from mtl_mcp.errors import NotFoundError as NotFoundError
    from mtl_mcp.errors import Retryable as Retryable
    from mtl_mcp.errors import StoreBusy as StoreBusy
    from mtl_mcp.errors import StoreDamaged as StoreDamaged
    from mtl_mcp.errors import StoreError as StoreError
    from mtl_mcp.errors import StoreReadOnly as StoreReadOnly
    from mtl_mcp.errors import StoreUnavailable as StoreUnavailable
    from mtl_mcp.errors import TranscriptError as TranscriptError
    from mtl_mcp.errors import UnusableOutput as UnusableOutput
    from mtl_mcp.memory import ImportReport as ImportReport
    from mtl_mcp.memory import LabelledVectors as LabelledVectors
    from mtl_mcp.memory import Memory as Memory
    from mtl_mcp.project import ProjectRef as ProjectRef
    from mtl_mcp.project import resolve_project as resolve_project
    from mtl_mcp.schemas import Insight as Insight
    from mtl_mcp.schemas import InsightDraft as InsightDraft
    from mtl_mcp.schemas import Provenance as Provenance
    from mtl_mcp.schemas import RecallHit as RecallHit
    from mtl_mcp.schemas import RecordResult as RecordResult
    from mtl_mcp.schemas import ShareResult as ShareResult
    from mtl_mcp.server.app import build_server as build_server

__all__ = sorted(["__version__", *_HOMES])


def __getattr__(name: str) -> object:
    import importlib

    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mtl_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
