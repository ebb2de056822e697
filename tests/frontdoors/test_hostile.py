"""Hostile input to the import reader, the insight models and the MCP tools: counted skips
or clear errors, never a crash. (Transcript readers: tests/test_transcripts.py.)"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from pydantic import ValidationError

from mtl_mcp import Memory
from mtl_mcp.memory.jsonl import IMPORT_LINE_MAX, read_import
from mtl_mcp.schemas import Insight, InsightDraft
from mtl_mcp.server.app import build_server
from mtl_mcp.text.lint import lint
from mtl_mcp.text.render import recall_text
from tests.conftest import distinct_lessons, lesson

KEYS = ["title", "description", "content", "polarity", "category", "domain", "languages"]
KEYS += ["tags", "id", "notes", "support", "created_at", "status", "projects", "extra"]
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=50),
    st.text(max_size=3000),
    st.sampled_from(["success", "failure", "other", "test-verification", "active", "\x00"]),
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=8)
    ),
    max_leaves=25,
)
DRAFTS = st.fixed_dictionaries(
    {
        "title": st.text(min_size=1, max_size=120),
        "description": st.text(min_size=1, max_size=320),
        "content": st.text(min_size=1, max_size=1100),
    },
    optional={
        "polarity": st.sampled_from(["success", "failure", "neutral"]),
        "tags": st.lists(st.text(max_size=45), max_size=14),
        "languages": st.lists(st.text(max_size=12), max_size=3),
        "domain": st.text(max_size=45),
    },
)
LINES = st.one_of(
    st.binary(max_size=400),
    JSON.map(lambda v: json.dumps(v).encode()),
    DRAFTS.map(lambda d: json.dumps(d).encode()),
    st.integers(1, 200_000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1, 100_000).map(lambda n: ('{"title":' * n + "1" + "}" * n).encode()),
    st.just(b'{"title": "a\\u0000b c", "description": "d", "content": "x y z w v u t"}'),
    st.just(b'{"title": "lone \\ud800 half", "description": "d", "content": "a b c d e f"}'),
    st.just(b'{"title": "raw \xff\xfe bytes", "description": "d", "content": "a b c d e f"}'),
)


def _json_over_lines(data: bytes) -> bool:
    """Whether `data` is one JSON document spread over several lines."""
    text = data.decode("utf-8", errors="replace")
    if sum(1 for line in text.split("\n") if line.strip()) < 2:
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINES, max_size=10))
def test_the_import_reader_yields_an_item_or_a_reason_for_every_line(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Binary, deep nesting, NULs, invalid UTF-8: each non-blank line is parsed or explained."""
    path = tmp_path_factory.mktemp("import") / "in.jsonl"
    data = b"\n".join(lines)
    assume(not _json_over_lines(data))  # read as one document: tests/frontdoors/test_bad_input
    path.write_bytes(data)
    seen = list(read_import(path))
    physical = enumerate(data.split(b"\n"), 1)
    expected = [n for n, raw in physical if raw.decode("utf-8", errors="replace").strip()]
    assert [n for n, _ in seen] == expected
    for _, item in seen:
        assert isinstance(item, Insight | InsightDraft) or (isinstance(item, str) and item)


def test_a_100_mb_import_line_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    """A 100 MB line costs one reported skip and a few MB; the next line still imports."""
    path = tmp_path / "huge.jsonl"
    good = json.dumps(lesson("Check the inputs first", "Validate every input at the boundary."))
    with path.open("w") as f:
        f.write('{"title": "')
        for _ in range(100):
            f.write("x" * 1_000_000)
        f.write('"}\n' + good + "\n")
    tracemalloc.start()
    try:
        seen = list(read_import(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen[0] == (1, f"longer than {IMPORT_LINE_MAX >> 20} MB: not an insight")
    assert seen[1][0] == 2 and isinstance(seen[1][1], InsightDraft)
    assert peak < 8_000_000, f"peak {peak / 1e6:.0f} MB"


@settings(max_examples=300, deadline=None)
@given(data=JSON)
def test_the_insight_models_accept_or_raise_a_validation_error_only(data: Any) -> None:
    """Whatever a tool call or an import line holds, validation passes or explains itself."""
    for model in (InsightDraft, Insight):
        try:
            item = model.model_validate(data)
        except ValidationError as exc:
            assert exc.errors()
        else:
            lint(item)
            json.dumps(item.model_dump(mode="json"))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drafts=st.lists(st.one_of(DRAFTS, JSON), min_size=1, max_size=3))
def test_the_store_answers_every_hostile_draft_with_a_result(
    store: Memory, drafts: list[Any]
) -> None:
    """record() never raises on garbage: one result per draft, rejected ones with reasons."""
    results = store.record(drafts)
    assert len(results) == len(drafts)
    for result in results:
        assert result.status in {"stored", "merged"} or result.reasons


HOSTILE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("recall_insights", {"plan": "x" * 2_000_000}),
    ("recall_insights", {"plan": "nul \x00 bytes in a plan about tests", "k": 20}),
    ("recall_insights", {"plan": "a plan", "k": 10_000}),
    ("recall_insights", {"plan": ["not", "a", "string"]}),
    ("recall_insights", {"plan": "a plan", "domains": [{"deep": [[[[["x"]]]]]}]}),
    ("recall_insights", {"plan": "a plan", "min_score": "NaN"}),
    ("record_session", {"summary": "s", "insights": [{"title": {"$gt": ""}}]}),
    ("record_session", {"summary": "s", "insights": [{}] * 4}),
    ("record_session", {"summary": "s" * 10_000}),
    ("record_session", {"summary": "s", "insights": ["just a string"]}),
    ("record_session", {"summary": "s", "insights": [lesson("T " * 200, "c " * 2000)]}),
    ("record_session", {"summary": "s", "transcript_path": "/etc/shadow"}),
    ("list_memories", {"limit": -1, "offset": -5}),
    ("list_memories", {"category": "'; DROP TABLE insights; --"}),
    ("rate_insight", {"id": "x' OR '1'='1", "helpful": True}),
    ("rate_insight", {"id": "ins_0", "helpful": "maybe", "note": "n" * 600}),
    ("forget_insight", {"id": "' OR 1=1 --"}),
    ("forget_insight", {}),
]


@pytest.mark.anyio
async def test_hostile_tool_arguments_get_clear_errors_and_the_server_keeps_serving(
    store: Memory,
) -> None:
    """Wrong types, huge strings, injections: is_error or a rejection, never a dead server."""
    kept, *_ = store.record(
        [
            lesson("Check the inputs first", "Validate every input where it enters the code."),
            *distinct_lessons(2),
        ]
    )
    async with Client(build_server(store.settings, store)) as client:
        for tool, arguments in HOSTILE_CALLS:
            result = await client.call_tool(tool, arguments)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            if result.is_error:
                assert text and "Traceback" not in text, (tool, arguments)
            else:
                assert result.structured_content is not None, (tool, arguments)
        recalled = await client.call_tool("recall_insights", {"plan": "validate inputs"})
        assert not recalled.is_error
    assert store.get(kept.id).title == "Check the inputs first"  # no injection deleted it


@settings(max_examples=100, deadline=None)
@given(drafts=st.lists(DRAFTS, min_size=1, max_size=3))
def test_recalled_text_keeps_every_field_on_its_own_line(drafts: list[dict[str, Any]]) -> None:
    """However a stored field is laid out, it cannot start a line that poses as a new note."""
    from mtl_mcp.schemas import RecallHit

    hits = []
    for n, draft in enumerate(drafts):
        try:
            valid = InsightDraft.model_validate(draft)
        except ValidationError:
            continue
        hits.append(
            RecallHit(
                id=f"ins_{n}",
                title=valid.title,
                description=valid.description,
                content=valid.content,
                polarity=valid.polarity or "success",
                category=valid.category or "other",
                domain=None,
                project=None,
                score=0.5,
                similarity=0.5,
            )
        )
    if not hits:
        return
    lines = recall_text(hits).splitlines()
    assert lines[0].startswith("Reference notes distilled from past coding sessions")
    structure = [line for line in lines[1:] if line.strip()]
    assert len(structure) == 3 * len(hits)
    for n, hit in enumerate(hits):
        title, when, body = structure[3 * n : 3 * n + 3]
        assert title.startswith(f"{n + 1}. ") and title.endswith(f"id {hit.id}]")
        assert when.startswith("   When: ") and body.startswith("   Lesson: ")
