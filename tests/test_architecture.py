"""The shape of the package: its public names, its layers, and what importing it costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mtl_mcp

PUBLIC = [
    "BudgetExceeded",
    "BudgetTooSmall",
    "ConfigError",
    "DistillError",
    "DistillUnavailable",
    "EmbeddingError",
    "ImportReport",
    "InputError",
    "Insight",
    "InsightDraft",
    "LabelledVectors",
    "Memory",
    "MtlError",
    "NotFoundError",
    "ProjectRef",
    "Provenance",
    "RecallHit",
    "RecordResult",
    "Retryable",
    "Settings",
    "ShareResult",
    "StoreBusy",
    "StoreDamaged",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "TranscriptError",
    "UnusableOutput",
    "__version__",
    "build_server",
    "load_settings",
    "resolve_project",
]
HEAVY = [
    "lancedb",
    "pyarrow",
    "numpy",
    "fastembed",
    "onnxruntime",
    "tokenizers",
    "google.protobuf",
    "anthropic",
    "mcp",
]


def test_the_public_names_are_pinned() -> None:
    """`mtl_mcp.__all__` is exactly the documented API, and every name in it resolves."""
    assert mtl_mcp.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(mtl_mcp, name) is not None, name
    assert set(PUBLIC) <= set(dir(mtl_mcp))


def test_every_error_is_an_mtl_error() -> None:
    """The error tree has one root, and the retryable errors say so by type."""
    errors = [getattr(mtl_mcp, name) for name in PUBLIC if name.endswith(("Error", "Busy"))]
    errors += [mtl_mcp.BudgetExceeded, mtl_mcp.BudgetTooSmall, mtl_mcp.DistillUnavailable]
    errors += [mtl_mcp.StoreDamaged, mtl_mcp.UnusableOutput, mtl_mcp.Retryable]
    errors += [mtl_mcp.StoreUnavailable, mtl_mcp.StoreReadOnly]
    assert all(issubclass(error, mtl_mcp.MtlError) for error in errors)
    retryable = {e.__name__ for e in errors if issubclass(e, mtl_mcp.Retryable)}
    assert retryable == {
        "BudgetExceeded",
        "DistillUnavailable",
        "Retryable",
        "StoreBusy",
        "StoreUnavailable",
    }


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A typo fails like any module attribute, naming the package."""
    try:
        mtl_mcp.Memroy  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "mtl_mcp" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_importing_the_package_loads_nothing_heavy() -> None:
    """`import mtl_mcp` (what hooks and the handshake pay) imports no heavy library."""
    code = f"import sys, mtl_mcp; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()
    assert loaded == ""


def test_a_local_store_does_not_run_lancedbs_rest_namespace_client(tmp_path: Path) -> None:
    """Opening a local store leaves the generated REST namespace client's package unrun (40%
    of lancedb's import time); one of its names, when asked for, still loads it."""
    code = (
        "import sys; from mtl_mcp.storage.lance import connect; "
        f"connect({str(tmp_path)!r}).table_names(); "
        "package = sys.modules['lance_namespace_urllib3_client']; "
        "print('NamespaceApi' in vars(package)); "
        "print(package.NamespaceApi.__name__, 'NamespaceApi' in vars(package))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    ).stdout.split("\n")
    assert out[:2] == ["False", "NamespaceApi True"]


def test_imports_flow_down_the_layers() -> None:
    """import-linter's contracts (pyproject.toml) hold: no upward import, no cycle."""
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(linter), "--no-cache"],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


MODULE_LINES_MAX = 600


def test_no_module_is_a_thousand_line_room() -> None:
    """Every module stays one concept: none is longer than MODULE_LINES_MAX lines (the
    facade was 1,010 before it was split along its concepts). The trial suites' task repos
    under data/ are data, not modules of the package."""
    package = Path(mtl_mcp.__file__).parent
    sizes = {
        str(path.relative_to(package)): len(path.read_text(encoding="utf-8").splitlines())
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] != "data"
    }
    too_long = {name: lines for name, lines in sizes.items() if lines > MODULE_LINES_MAX}
    assert not too_long, too_long
