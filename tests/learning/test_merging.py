"""A consolidation merge written by the configured distillation backend, against the fake
Messages API through the real anthropic SDK: a new insight the cluster merges into, its
tokens counted, undone by deleting it; the best wording when the model fails. A scripted
model shows the machinery, not the quality of a real model's merge."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings
from mtl_mcp.errors import NotFoundError
from mtl_mcp.learning.merging import cluster_merger
from mtl_mcp.learning.pipeline import ledger
from mtl_mcp.schemas import Provenance
from tests.fake_anthropic import FakeAnthropic
from tests.learning.test_distill import MODEL, api_settings, fake  # noqa: F401 (fixtures)
from tests.memory.test_consolidation import SCOPED, WORDINGS

MERGED = {
    "title": "Reproduce a reported bug with a failing test before fixing it",
    "description": "When someone reports that the code gives a wrong result.",
    "content": "Turn the report into an automated test and watch it fail before changing "
    "code: it proves the report is understood, and the same test proves the fix.",
    "polarity": "success",
    "category": "test-verification",
    "domain": "repo-bugfix",
    "languages": [],
    "tags": ["reproduction"],
}


@pytest.fixture
def configured(api_settings: Settings) -> Settings:  # noqa: F811 (the imported fixture)
    """The Anthropic API backend chosen explicitly: consolidation may spend on merges."""
    return replace(api_settings, distill_backend="anthropic")


def test_no_backend_configured_means_the_best_wording(settings: Settings) -> None:
    assert cluster_merger(settings) is None  # "auto": an idle pass spends nothing unasked


def test_the_backend_writes_the_merge_and_undo_removes_it(
    configured: Settings,
    fake: FakeAnthropic,  # noqa: F811 (the imported fixture)
) -> None:
    memory = Memory(configured)
    ids = [r.id for r in memory.record(WORDINGS, Provenance(project="p1")) if r.id]
    merger = cluster_merger(configured)
    assert merger is not None and merger.name == MODEL
    fake.reply_json({"insights": [MERGED]}, input_tokens=400, output_tokens=120)

    run = memory.consolidate(merger=merger)

    [request] = fake.message_requests
    assert all(w["title"] in request.user_text for w in WORDINGS)
    [(kept, members)] = run.merged
    assert kept not in ids and sorted(members) == sorted(ids)
    written = memory.get(kept)
    assert written.title == MERGED["title"] and written.support == 3
    assert written.distilled_by == MODEL and written.projects == ["p1"]
    assert {memory.get(i).status for i in ids} == {"retired"}
    assert [h.id for h in memory.recall(MERGED["content"], k=1)] == [kept]
    assert ledger(configured).by_backend()["anthropic"][0] == 520

    memory.undo_consolidation(run.run)

    with pytest.raises(NotFoundError):
        memory.get(kept)
    assert {memory.get(i).status for i in ids} == {"active"}
    memory.close()


def test_a_failed_model_call_keeps_the_best_existing_wording(
    configured: Settings,
    fake: FakeAnthropic,  # noqa: F811 (the imported fixture)
) -> None:
    memory = Memory(configured)
    ids = [r.id for r in memory.record(WORDINGS) if r.id]
    fake.reply_status(500, times=3, should_retry=False)

    run = memory.consolidate(merger=cluster_merger(configured))

    [(kept, members)] = run.merged
    assert kept in ids and sorted([kept, *members]) == sorted(ids)
    assert memory.get(kept).support == 3
    memory.close()


def test_the_backend_weighs_a_flagged_contradiction_and_the_flag_stays(
    configured: Settings,
    fake: FakeAnthropic,  # noqa: F811 (the imported fixture)
) -> None:
    memory = Memory(configured)
    ids = [r.id for r in memory.record(SCOPED) if r.id]
    fake.reply_json({"verdict": "scoped", "reason": "one is about reads, one about payments"})

    run = memory.consolidate(merger=cluster_merger(configured))

    [request] = fake.message_requests
    assert SCOPED[0]["title"] in request.user_text and SCOPED[1]["title"] in request.user_text
    [change] = run.changes
    assert change.kind == "conflict" and {change.id, *change.others} == set(ids)
    assert f"{MODEL} says each holds in its scope: one is about reads" in change.why
    assert {memory.get(i).status for i in ids} == {"active"}  # flagged, not settled
    memory.close()
