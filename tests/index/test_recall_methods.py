"""Recall's ranking parts: plan sentences, BM25, rank fusion, and the methods end to end."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from mtl_mcp import Memory
from mtl_mcp.errors import InputError
from mtl_mcp.index.bm25 import Bm25Index, LooseDocuments, query_terms
from mtl_mcp.index.fusion import fuse
from mtl_mcp.index.methods import DEFAULT_METHOD, METHODS, get_method, plan_sentences, plan_vector
from tests.conftest import lesson


def test_plan_sentences_split_steps_and_keep_list_markers_with_their_step() -> None:
    """Sentences and lines become steps; a bare "1." joins the step it starts."""
    plan = "1. Reproduce the bug in a test.\n2. Fix it. Then: rerun the whole suite!"
    assert plan_sentences(plan) == [
        "1. Reproduce the bug in a test.",
        "2. Fix it.",
        "Then: rerun the whole suite!",
    ]
    assert plan_sentences("Just one step") == ["Just one step"]
    long = " ".join(f"Step number {n} does something." for n in range(10))
    assert len(plan_sentences(long)) == 6


def test_a_one_sentence_plan_embeds_exactly_as_before(store: Memory) -> None:
    """Sentence pooling changes nothing for a single-sentence plan (no extra model call)."""
    plan = "Reproduce the failing test in isolation and fix the cause."
    assert np.array_equal(
        plan_vector(store.embedder, plan, split=True), store.embedder.embed_query(plan)
    )


def test_bm25_ranks_the_document_sharing_the_rare_word_first() -> None:
    """A rare shared term outweighs common ones; documents sharing no term score 0."""
    index = Bm25Index(
        pa.array(
            [
                "check the test output before you finish the test",
                "the idempotency key makes a retried request safe",
                "check the build and the test output",
                None,
            ]
        )
    )
    scores = index.scores("Make retries safe with an idempotency key; check the output.")
    assert int(np.argmax(scores)) == 1
    assert scores[3] == 0.0
    assert index.scores("nothing matches xyzzy").sum() == 0.0


def test_an_empty_store_or_text_without_words_recalls_nothing_and_does_not_fail(
    store: Memory,
) -> None:
    """No rows (or no indexable words) give an empty index, not an error."""
    assert store.recall("Reproduce the bug first. Then fix it.") == []
    empty = Bm25Index(pa.array(["", "... !!!", None]))
    assert empty.scores("anything at all").tolist() == [0.0, 0.0, 0.0]


def test_fusion_prefers_items_both_rankings_like_and_shorter_k_is_a_prefix() -> None:
    """RRF puts the item ranked well by both first; fuse(k=2) is the head of fuse(k=4)."""
    dense = np.array([0.9, 0.8, 0.1, 0.7], dtype=np.float32)  # ranks 0, 1, 3, 2
    keyword = np.array([0.0, 2.0, 0.5, 3.0], dtype=np.float32)  # ranks 3, 1, 2 (0 unmatched)
    four = fuse(dense, keyword, 4)
    assert list(four[:2]) == [3, 1]  # 1/63 + 1/61 and 1/62 + 1/62 beat 1/61 alone
    assert list(fuse(dense, keyword, 2)) == list(four[:2])
    assert list(fuse(None, keyword, 4)) == [3, 1, 2, 0]  # keyword-only still fills k
    assert list(fuse(dense, None, 2)) == [0, 1]


def test_methods_are_named_and_unknown_names_are_input_errors() -> None:
    """The default is the evaluated `mtl`; an unknown method lists the known ones."""
    assert get_method(None) is METHODS[DEFAULT_METHOD] and DEFAULT_METHOD == "mtl"
    assert not METHODS["dense"].keywords and METHODS["dense"].rating_weight == 0.0
    with pytest.raises(InputError, match="dense"):
        get_method("magic")


def test_keyword_ranking_finds_a_lesson_by_its_rare_shared_word(store: Memory) -> None:
    """Through recall, BM25 puts the one lesson that shares the plan's rare term first."""
    store.record(
        [
            lesson(
                "Retry transient failures with backoff",
                "Retry calls that time out with exponential backoff and jitter, and cap the "
                "number of attempts.",
            ),
            lesson(
                "Test the retry path, not only success",
                "Write tests where the first call fails so the retry logic actually runs.",
            ),
            lesson(  # last: position order alone would rank it last
                "Deduplicate webhook deliveries",
                "Store each delivery's idempotency key and skip keys already processed, since "
                "providers resend events.",
            ),
        ]
    )
    plan = "Make the payment safe to resend: send an idempotency key with every attempt."
    hits = store.recall(plan, k=3, method="bm25")
    assert hits[0].title == "Deduplicate webhook deliveries"
    assert len(hits) == 3  # lessons sharing fewer words still fill the k slots


LONG = "When debugging a failure, start from {} and narrow the cause step by step."


def test_recall_excludes_domains_and_every_method_honours_filters(store: Memory) -> None:
    """exclude_domains removes a domain for every method; retired insights never return."""
    results = store.record(
        [
            lesson("Read the traceback to the end", LONG.format("the last line"), domain="a"),
            lesson("Bisect to find the breaking change", LONG.format("halving"), domain="b"),
            lesson("Log inputs at the boundary", LONG.format("the raw input"), domain="c"),
        ]
    )
    for name in METHODS:
        hits = store.recall("debug the failure", k=3, exclude_domains=["A"], method=name)
        assert {h.domain for h in hits} == {"b", "c"}, name
    for _ in range(3):
        store.rate(results[1].id or "", helpful=False)
    for name in METHODS:
        hits = store.recall("bisect the history", k=3, method=name)
        assert results[1].id not in {h.id for h in hits}, name


def test_bm25_scores_rows_outside_the_index_exactly_as_a_rebuild_would() -> None:
    """A row appended after the index was built, counted into the corpus statistics, gets
    the very scores a rebuilt index gives; the indexed rows' scores do not move either."""
    texts = [
        "Reproduce the failing test before fixing it",
        "Pin the clock in date-dependent tests",
        "Retry network calls with exponential backoff",
        "Validate configuration files at start-up",
    ]
    new = "Freeze the clock when a test depends on midnight"
    old = Bm25Index(pa.array(texts))
    rebuilt = Bm25Index(pa.array([*texts, new]))
    query = "make the midnight test deterministic with a frozen clock"
    loose = LooseDocuments([new])
    terms = query_terms(query)
    corpus = old.statistics(terms) + loose.statistics(terms)
    combined = np.concatenate([old.scores(query, corpus), loose.scores(query, corpus)])
    assert combined.tolist() == rebuilt.scores(query).tolist()
    assert int(np.argmax(combined)) == 4  # it ranks first, as after a rebuild


def test_bm25_indexes_score_as_one_index_over_all_their_documents() -> None:
    """Two indexes scored with their summed statistics give exactly the scores of one index
    over both corpora: a one-row corpus gets no idf of its own. Hidden rows drop out of the
    statistics as if they were not indexed."""
    big = [f"Check the {word} output before you finish" for word in ("build", "test", "lint")]
    small = ["Make the retried request idempotent with a key"]
    query = "check that a retried request is idempotent"
    terms = query_terms(query)
    one, other = Bm25Index(pa.array(big)), Bm25Index(pa.array(small))
    together = one.statistics(terms) + other.statistics(terms)
    both = Bm25Index(pa.array([*big, *small])).scores(query)
    assert [*one.scores(query, together), *other.scores(query, together)] == both.tolist()
    assert other.scores(query)[0] < other.scores(query, together)[0]  # its own idf was tiny
    hidden = np.array([False, True, False])
    without = one.statistics(terms, hidden) + other.statistics(terms)
    expected = Bm25Index(pa.array([big[0], big[2], *small])).scores(query)
    scored = [*one.scores(query, without)[[0, 2]], *other.scores(query, without)]
    assert scored == expected.tolist()
