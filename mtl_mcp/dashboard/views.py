"""What the dashboard shows, shaped from `Memory`'s answers: JSON-ready, and redacted.

Every string that reaches the page passes the redactor (`shown`), ids included: nothing the
page displays can hold a secret the redactor knows. Nothing here returns a key, a token, a
store URI or a path of the data directory, and an error names no place at all (`told`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from mtl_mcp.config import Settings
from mtl_mcp.schemas import Insight
from mtl_mcp.text.redact import redact

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

LIST_FIELDS = (
    "id",
    "title",
    "description",
    "domain",
    "category",
    "polarity",
    "project",
    "support",
    "helpful",
    "harmful",
    "recall_count",
    "status",
    "source",
    "updated_at",
)


# Joins the strings of one answer for a single pass of the redactor (a call costs ~0.1 ms
# however short its text, and a page holds hundreds). No secret pattern matches it, so a
# finding that swallowed one shows as a miscount, and then each string is redacted alone.
_SEPARATOR = "\x00"


def shown(value: Any) -> Any:
    """`value` made JSON-ready, every string in it redacted (mapping keys are ours)."""
    plain = _plain(value)
    texts: dict[str, str] = {}
    _strings(plain, texts)
    if texts:
        originals = list(texts)
        joined = redact(_SEPARATOR.join(originals)).split(_SEPARATOR)
        if len(joined) != len(originals):
            joined = [redact(text) for text in originals]
        texts = dict(zip(originals, joined, strict=True))
    return _replaced(plain, texts)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return value.name
    return value


def _strings(value: Any, found: dict[str, str]) -> None:
    if isinstance(value, str):
        found[value.replace(_SEPARATOR, "")] = ""
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)


def _replaced(value: Any, redacted: dict[str, str]) -> Any:
    if isinstance(value, str):
        return redacted[value.replace(_SEPARATOR, "")]
    if isinstance(value, dict):
        return {k: _replaced(v, redacted) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, redacted) for v in value]
    return value


def without_paths(value: Any, settings: Settings) -> Any:
    """`value`, JSON-ready, with the data directory and the stores named in words: an
    error or a share's reasons may name them (the page is told what, never where)."""
    stores = ((settings.store_uri, "<store>"), (settings.team_uri, "<team pool>"))
    places = {uri.rstrip("/"): word for uri, word in stores if uri and uri.rstrip("/")}
    places[str(settings.home)] = "<data directory>"
    for path in [p for p in places if "://" not in p]:
        places.setdefault(os.path.realpath(path), places[path])
    order = sorted(places, key=len, reverse=True)  # the longest first: a store in the home

    def scrub(item: Any) -> Any:
        if isinstance(item, str):
            for path in order:
                item = item.replace(path, places[path])
            return item
        if isinstance(item, dict):
            return {k: scrub(v) for k, v in item.items()}
        if isinstance(item, list):
            return [scrub(v) for v in item]
        return item

    return scrub(_plain(value))


# What is left of a place in an error's text once the data directory and the stores are
# named: an address (an object store's endpoint) or an absolute path (a file elsewhere, a
# library's source), but not a slash inside a word, a URL's path or a `<placeholder>/...`.
_ADDRESS = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s()<>{}\[\]'\",;]+", re.I)
_PATH = re.compile(r"(?<![\w.~:/\\<>-])/[^\s/()<>{}\[\]'\",;]+(?:/[^\s/()<>{}\[\]'\",;]*)*")


def told(message: str, settings: Settings) -> str:
    """An error's text as the page is told it: what went wrong and what to do, with no
    place in it (the data directory, a store, an address or a path: the CLI names them)."""
    text = str(without_paths(message, settings))
    return _PATH.sub("<path>", _ADDRESS.sub("<address>", text))


def listed(insights: list[Insight]) -> list[dict[str, Any]]:
    """The rows of a browse page."""
    return list(shown([i.model_dump(mode="json", include=set(LIST_FIELDS)) for i in insights]))


def facets(stats: Mapping[str, Any], team: Mapping[str, Any] | None) -> dict[str, Any]:
    """The values each browse filter offers (active insights of both tiers), commonest
    first, with the totals; no paths, URIs or model files."""
    merged: dict[str, Counter[str]] = {}
    for name in ("by_domain", "by_category", "by_polarity", "by_project"):
        counts: Counter[str] = Counter(stats.get(name) or {})
        if team:
            counts.update((team.get("counts") or {}).get(name) or {})
        merged[name.removeprefix("by_")] = counts
    return dict(
        shown(
            {
                "total": stats.get("total", 0),
                "retired": stats.get("retired", 0),
                "team": team is not None,
                **{
                    name: [{"value": v, "count": c} for v, c in counts.most_common()]
                    for name, counts in merged.items()
                },
            }
        )
    )


def queue(rows: list[dict[str, object]]) -> list[dict[str, Any]]:
    """The distillation queue: each job's session, state, attempts and why it waits (the
    transcript by its file name only)."""
    return [
        dict(
            shown(
                {
                    "session_id": row.get("session_id"),
                    "state": row.get("state"),
                    "client": row.get("client"),
                    "transcript": Path(str(row.get("transcript_path") or "")).name,
                    "attempts": row.get("attempts"),
                    "created_at": row.get("created_at"),
                    "next_attempt_at": row.get("next_attempt_at"),
                    "last_error": row.get("last_error"),
                }
            )
        )
        for row in rows
    ]


def spend(settings: Settings, used: Mapping[str, int], local: set[str]) -> dict[str, Any]:
    """Today's tokens by backend against each budget: the daily one (every backend but a
    local model), a subscription's own, a local model's own."""
    subscription = {"claude-code", "codex", "sampling"}
    rows = []
    for backend, tokens in sorted(used.items()):
        if backend in local:
            budget, which = settings.local_daily_tokens, "local model's own"
        elif backend in subscription:
            budget, which = settings.subscription_daily_tokens, "subscription's own"
        else:
            budget, which = settings.daily_token_budget, "daily"
        rows.append({"backend": backend, "tokens": tokens, "budget": budget, "budget_kind": which})
    counted = sum(t for b, t in used.items() if b not in local)
    return {
        "day": datetime.now(UTC).date().isoformat(),
        "daily": {"tokens": counted, "budget": settings.daily_token_budget},
        "backends": rows,
        "subscription_budget": settings.subscription_daily_tokens,
        "local_budget": settings.local_daily_tokens,
    }


MAP_POINTS = 5000  # a sample beyond this: the page draws it in a canvas, quickly


def memory_map(memory: Memory) -> dict[str, Any]:
    """The map's points (a sample past MAP_POINTS) and the abstraction figures."""
    import numpy as np

    from mtl_mcp.quality.abstraction import measure
    from mtl_mcp.quality.memory_map import project_2d

    labelled = memory.vectors(("id", "title", "domain", "category"))
    total = len(labelled.records)
    chosen = np.arange(total)
    if total > MAP_POINTS:
        chosen = np.sort(np.random.default_rng(0).choice(total, MAP_POINTS, replace=False))
    xy = project_2d(labelled.vectors[chosen]) if total else np.zeros((0, 2))
    records = [labelled.records[int(n)] for n in chosen]
    report = measure(
        labelled.vectors,
        labelled.column("domain"),
        labelled.column("id"),
        labelled.column("title"),
    )
    points = [
        {
            "id": r["id"],
            "title": r["title"],
            "domain": r.get("domain") or "(none)",
            "category": r.get("category") or "other",
            "x": round(float(x), 4),
            "y": round(float(y), 4),
        }
        for r, (x, y) in zip(records, xy, strict=True)
    ]
    return dict(
        shown(
            {
                "points": points,
                "total": total,
                "shown": len(points),
                "lisi": report.mean_lisi,
                "dbi": report.davies_bouldin,
                "specificity": report.mean_specificity,
                "domains": report.domains,
                "note": report.note,
                "most_specific": report.most_specific[:5],
            }
        )
    )
