"""Health checks for `mtl-mcp doctor`: each says what is wrong and how to fix it."""

from __future__ import annotations

import tempfile

from pydantic import BaseModel

from mtl_mcp.config import DEFAULT_EMBED_MODEL, Settings
from mtl_mcp.errors import MtlError


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    required: bool = True


def _data_dir(settings: Settings) -> Check:
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=home):
            pass
    except OSError as exc:
        return Check(
            name="data dir",
            ok=False,
            detail=f"{home} is not writable ({exc})",
            fix="fix its permissions, or point MTL_MCP_HOME / --home elsewhere",
        )
    return Check(name="data dir", ok=True, detail=str(home))


def _model(settings: Settings) -> Check:
    from mtl_mcp.embed import default_model_file, get_embedder

    try:
        if settings.embed_model == DEFAULT_EMBED_MODEL:
            path = default_model_file()
            detail = f"{settings.embed_model} ({path}, sha256 verified)"
        else:
            detail = settings.embed_model
        embedder = get_embedder(settings)
        dim = embedder.embed_query("doctor").shape[0]
    except MtlError as exc:
        return Check(
            name="embedding model",
            ok=False,
            detail=str(exc),
            fix="reinstall mtl-mcp, or unset MTL_MCP_EMBED_MODEL to use the default",
        )
    return Check(name="embedding model", ok=True, detail=f"{detail}, dim {dim}")


def _store(settings: Settings) -> Check:
    from mtl_mcp.store import InsightStore

    store = InsightStore(settings)
    try:
        numbers = store.stats()
        meta = store.meta
    except MtlError as exc:
        return Check(
            name="store",
            ok=False,
            detail=str(exc),
            fix=f"move {settings.store_uri} aside and re-import an export "
            "(`mtl-mcp import FILE`), or restore it from a backup",
        )
    detail = (
        f"{settings.store_uri}: {numbers['total']} active insights, "
        f"schema {meta.get('schema_version')}, model {meta.get('embed_model')}"
    )
    if meta.get("embed_model") != settings.embed_model:
        return Check(
            name="store",
            ok=False,
            detail=detail,
            fix=f"run `mtl-mcp reindex` to re-embed with {settings.embed_model}",
        )
    return Check(name="store", ok=True, detail=detail)


def _api_key(settings: Settings) -> Check:
    from mtl_mcp.distill import has_api_key

    if has_api_key(settings):
        return Check(
            name="Anthropic API key",
            ok=True,
            required=False,
            detail=f"set; distillation uses {settings.distill_model}",
        )
    return Check(
        name="Anthropic API key",
        ok=False,
        required=False,
        detail="not set: session transcripts are not distilled (recall still works)",
        fix=f"export ANTHROPIC_API_KEY, or add anthropic_api_key to {settings.config_file}",
    )


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order a person would fix them."""
    checks = [_data_dir(settings), _model(settings)]
    if checks[0].ok and checks[1].ok:
        checks.append(_store(settings))
    checks.append(_api_key(settings))
    return checks
