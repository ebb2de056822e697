"""The starter pack: abstract insights shipped with mtl-mcp, loaded into a new store."""

from __future__ import annotations

from importlib import resources

from mtl_mcp.schemas import InsightDraft


def starter_drafts() -> list[InsightDraft]:
    """The starter pack shipped as package data."""
    text = resources.files("mtl_mcp").joinpath("data/starter.jsonl").read_text(encoding="utf-8")
    return [InsightDraft.model_validate_json(line) for line in text.splitlines() if line.strip()]
