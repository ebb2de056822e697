"""The evaluation harness, label inference and the memory map: real store, real model."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.errors import InputError
from mtl_mcp.index.categories import category_prototypes
from mtl_mcp.quality.evaluation import (
    evaluate,
    load_pool,
    load_queries,
    score_query,
    score_ranker,
    shipped_set,
    throwaway_store,
)
from mtl_mcp.quality.memory_map import PNG_HINT, MapPoint, write_map
from mtl_mcp.schemas import InsightDraft
from mtl_mcp.text.polarity import infer_polarity
from tests.conftest import lesson

# A tiny set in the documented format: three domains, each lesson told in two of them.
TINY_POOL = [
    {
        "id": "t1",
        "domain": "web-backend",
        "title": "Reproduce a reported bug with a failing test",
        "description": "When a user reports wrong behaviour for some input.",
        "content": "Write the reported input and the expected output as a test and watch it "
        "fail before changing code.",
    },
    {
        "id": "t2",
        "domain": "data-science",
        "title": "Capture a wrong number as a failing check first",
        "description": "When an analysis produces a figure someone says is wrong.",
        "content": "Turn the reported input and the expected figure into an automated check "
        "that fails before touching the pipeline.",
    },
    {
        "id": "t3",
        "domain": "devops-shell",
        "title": "Preview what a destructive command will touch",
        "description": "When a script deletes or overwrites files.",
        "content": "List the files a cleanup would remove and read the list before running "
        "the deletion for real.",
    },
    {
        "id": "t4",
        "domain": "data-science",
        "title": "Count rows a bulk update will change before running it",
        "description": "When a transformation rewrites many records at once.",
        "content": "Run the selection alone, count what it matches, and compare with what "
        "you expect before applying the change.",
    },
]
TINY_QUERIES = [
    {
        "id": "q1",
        "domain": "web-backend",
        "split": "dev",
        "task": "The totals endpoint returns the wrong sum for refunds; fix it.",
        "plan": "Reproduce the wrong total with a failing test for the reported input. Then "
        "fix the calculation and rerun the tests.",
        "relevant": ["t2"],
    },
    {
        "id": "q2",
        "domain": "devops-shell",
        "split": "test",
        "task": "Write a cron script that prunes old build artefacts.",
        "plan": "List what the pruning would delete and check the list first. Only then run "
        "the deletion, and count what was removed.",
        "relevant": ["t4"],
    },
]


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_metrics_match_a_hand_computed_ranking() -> None:
    """Two of three relevant items at ranks 1 and 3 give the textbook figures."""
    ranked = ["a", "x", "b", "y", "z", "w", "v", "u", "t", "s"]
    figures = score_query(ranked, {"a", "b", "c"}, k=3, relevant_count=3)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert figures == pytest.approx(
        {
            "precision_at_k": 2 / 3,
            "hit_at_k": 1.0,
            "mrr": 1.0,
            "recall_at_10": 2 / 3,
            "ndcg_at_10": (1 + 1 / math.log2(4)) / ideal,
        }
    )
    late = score_query(["x", "y", "z", "a"] + ["n"] * 6, {"a"}, k=3, relevant_count=1)
    assert late["precision_at_k"] == late["hit_at_k"] == 0.0
    assert late["mrr"] == pytest.approx(0.25)
    assert late["ndcg_at_10"] == pytest.approx(1 / math.log2(5))


def test_shipped_set_runs_and_the_default_beats_the_dense_baseline() -> None:
    """On all 72 shipped queries the default method ranks better than plain cosine."""
    pool_path, queries_path = shipped_set()
    dense, default = evaluate(pool_path, queries_path, methods=["dense", "mtl"])
    assert dense.queries == default.queries == 72
    assert default.pool.stored == 116 and default.pool.rejected == 0
    assert len(default.per_domain) == 12
    assert default.precision_at_k > 1.1 * dense.precision_at_k
    assert default.hit_at_k >= dense.hit_at_k
    assert default.ndcg_at_10 > dense.ndcg_at_10


def test_cli_eval_runs_on_a_tiny_set_in_the_documented_format(tmp_path: Path) -> None:
    """`eval --pool --queries --json` scores a custom set and reports per-domain figures."""
    pool = write_jsonl(tmp_path / "pool.jsonl", TINY_POOL)
    queries = write_jsonl(tmp_path / "queries.jsonl", TINY_QUERIES)
    code, out, _ = run("eval", "--pool", str(pool), "--queries", str(queries), "-k", "1", "--json")
    assert code == 0
    report = json.loads(out)
    figures = ("precision_at_k", "hit_at_k", "mrr", "recall_at_10", "ndcg_at_10")
    assert set(figures) | {"per_domain"} <= set(report)
    assert report["queries"] == 2 and report["method"] == "mtl"
    assert set(report["per_domain"]) == {"web-backend", "devops-shell"}
    # Each plan paraphrases its relevant lesson, so the top result is right.
    assert report["precision_at_k"] == report["hit_at_k"] == 1.0
    code, out, _ = run(
        "eval", "--pool", str(pool), "--queries", str(queries), "--compare", "--split", "test"
    )
    assert code == 0 and "bm25" in out and "dense" in out and "1 queries" in out


def test_eval_reports_a_bad_line_by_number(tmp_path: Path) -> None:
    """A query naming an id the pool lacks is an error that names the file and line."""
    pool = write_jsonl(tmp_path / "pool.jsonl", TINY_POOL)
    queries = write_jsonl(tmp_path / "queries.jsonl", [{**TINY_QUERIES[0], "relevant": ["t9"]}])
    with pytest.raises(InputError, match=r"queries.jsonl:1: .*t9"):
        load_queries(queries, load_pool(pool))


def test_leave_one_domain_out_never_returns_the_query_domain(tmp_path: Path) -> None:
    """With the protocol on, nothing from the query's domain comes back; with it off it does."""
    pool = load_pool(write_jsonl(tmp_path / "pool.jsonl", TINY_POOL))
    queries = load_queries(write_jsonl(tmp_path / "queries.jsonl", TINY_QUERIES), pool)
    domain = {item.id: item.draft.domain for item in pool}
    with throwaway_store(pool) as evalset:
        store = evalset.memory
        plan = TINY_QUERIES[0]["plan"]
        assert isinstance(plan, str)
        # The same lesson told in the query's own domain is among the two best...
        assert "web-backend" in {h.domain for h in store.recall(plan, k=2)}
        # ...and never comes back once that domain is left out, however deep one asks.
        hits = store.recall(plan, k=4, exclude_domains=["web-backend"])
        assert len(hits) == 3 and all(h.domain != "web-backend" for h in hits)

        def ranker(text: str, k: int, exclude: list[str]) -> list[str]:
            return [h.id for h in store.recall(text, k=k, exclude_domains=exclude)]

        lodo = score_ranker(evalset, queries, ranker, name="mtl", k=3, details=True)
        assert lodo.per_query is not None
        for score in lodo.per_query:
            assert all(domain[r] != score.domain for r in score.retrieved)
        kept = score_ranker(
            evalset, queries, ranker, name="mtl", k=3, leave_domain_out=False, details=True
        )
        assert kept.per_query is not None
        assert any(domain[r] == s.domain for s in kept.per_query for r in s.retrieved)


def test_pool_ids_map_to_content_ids_and_merges_count_once(tmp_path: Path) -> None:
    """A pool paraphrase merges into its twin: both pool ids map to one store id."""
    twin = {**TINY_POOL[0], "id": "t1b", "domain": "frontend"}
    twin["content"] = str(TINY_POOL[0]["content"]).replace("Write", "Write down")
    pool = load_pool(write_jsonl(tmp_path / "pool.jsonl", [*TINY_POOL, twin]))
    with throwaway_store(pool) as evalset:
        assert evalset.summary.merged == 1 and evalset.summary.stored == 4
        assert evalset.store_ids["t1"] == evalset.store_ids["t1b"]
        assert evalset.store_ids["t1"].startswith("ins_")
        assert evalset.pool_ids[evalset.store_ids["t1"]] == "t1"


def test_record_infers_missing_polarity_and_category(store: Memory) -> None:
    """A draft without labels is stored with inferred ones; given labels are kept."""
    told_as_failure = lesson(
        "Wait for readiness instead of sleeping",
        "A fixed sleep before the first request passed locally and failed on slower machines. "
        "Poll the health check with a timeout.",
    )
    practice = lesson(
        "Validate untrusted input at the boundary",
        "Check type, length and format of external input against an allow-list and reject early.",
    )
    labelled = lesson(
        "Quote every shell expansion",
        "Unquoted variables split on spaces and broke a path.",
        polarity="success",
        category="file-syntax",
    )
    results = store.record([told_as_failure, practice, labelled])
    stored = [store.get(r.id or "") for r in results]
    assert [s.polarity for s in stored] == ["failure", "success", "success"]
    assert stored[1].category == "input-validation"
    assert stored[2].category == "file-syntax"


def test_inference_accuracy_on_the_labelled_pool_items(store: Memory) -> None:
    """On the 81 labelled shipped pool items: polarity >= 90% and category >= 55% right."""
    items = [item for item in load_pool(shipped_set()[0]) if item.draft.category is not None]
    assert len(items) == 81
    drafts = [item.draft for item in items]
    unlabelled = [
        InsightDraft.model_validate(d.model_dump(exclude={"polarity", "category"})) for d in drafts
    ]
    polarity = sum(infer_polarity(u) == d.polarity for u, d in zip(unlabelled, drafts, strict=True))
    vectors = store.embedder.embed_documents([d.embedding_text() for d in drafts])
    nearest = category_prototypes(store.embedder).nearest(vectors)
    category = sum(c == d.category for c, d in zip(nearest, drafts, strict=True))
    assert polarity / len(drafts) >= 0.9
    assert category / len(drafts) >= 0.55


def test_map_html_is_self_contained_and_shows_every_insight(store: Memory, tmp_path: Path) -> None:
    """`map --out FILE.html` writes one offline page naming every stored insight's id."""
    drafts = [
        lesson(f"Lesson number {n} about {topic}", f"Always check {topic} before moving on.")
        for n, topic in enumerate(["caches", "migrations", "flaky tests", "config files"])
    ]
    ids = [r.id for r in store.record(drafts)]
    out = tmp_path / "map.html"
    code, _, err = run("map", "--out", str(out))  # the same data dir, from MTL_MCP_HOME
    assert code == 0 and "4 insights" in err
    page = out.read_text(encoding="utf-8")
    assert all(f'data-id="{i}"' in page for i in ids)
    assert "<svg" in page and "Lesson number 3 about config files" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_map_png_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking for a PNG without the optional extra names the pip command."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the import now fails
    point = MapPoint(
        id="ins_1",
        title="t",
        description="d",
        content="c",
        domain=None,
        category="other",
        polarity="success",
        x=0.0,
        y=0.0,
    )
    with pytest.raises(InputError) as caught:
        write_map([point], tmp_path / "map.png")
    assert str(caught.value) == PNG_HINT and "pip install 'mtl-mcp[map]'" in PNG_HINT
