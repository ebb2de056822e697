"""The distiller is shown the memory's nearest insights and may answer that the session
confirms one instead of writing it again: support + 1, no new row. Against the fake
Messages API (the real anthropic SDK) and a fake OpenAI-compatible endpoint. A scripted
model shows that the machinery works, not that a real model confirms well."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.learning.backends.anthropic_api import AnthropicBackend
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend
from mtl_mcp.learning.pipeline import learn
from mtl_mcp.learning.proposals import Judgement
from mtl_mcp.schemas import Provenance
from tests.fake_anthropic import FakeAnthropic, RecordedRequest
from tests.fake_chat import MODEL as CHAT_MODEL
from tests.fake_chat import FakeChat

API_KEY = "sk-ant-test-0123456789abcdefghij"
MODEL = "claude-haiku-4-5"
KNOWN = {
    "title": "Reproduce date bugs with a frozen clock",
    "description": "When a bug depends on the calendar or the current time.",
    "content": "Pin the clock at the boundary that fails before changing code, so the fix is "
    "proven by a test that failed first and the bug cannot return unnoticed.",
}
NEW = {
    "title": "Test both sides of a range boundary",
    "description": "When a computation splits time into ranges.",
    "content": "Check the first and last moment of each range, because off-by-one errors "
    "hide exactly at the edges.",
    "polarity": "success",
    "category": "input-validation",
    "domain": "web-backend",
    "languages": [],
    "tags": [],
}
DIGEST = (
    "user: the nightly report job crashes on the first day of each month\n"
    "assistant: froze the clock at the month boundary in a test, reproduced the crash\n"
    "assistant: fixed the date range; the new test and the suite pass\n"
)
LISTED = re.compile(r"^- (ins_[0-9a-f]{16}): ", re.M)


@pytest.fixture
def memory(settings: Settings) -> Iterator[Memory]:
    opened = Memory(settings)
    opened.record([KNOWN], Provenance(project="first-project", session_id="s0"))
    yield opened
    opened.close()


def confirming(request: RecordedRequest, fake: FakeAnthropic, extra: list[str]) -> dict[str, Any]:
    """A distiller that confirms the first insight it was shown, and writes one new one."""
    shown = LISTED.findall(request.user_text)
    return fake.message(text=json.dumps({"insights": [NEW], "confirms": shown[:1] + extra}))


def learn_with(memory: Memory, backend: Any) -> Any:
    return learn(
        memory,
        DIGEST,
        backend=backend,
        outcome_hint="unknown",
        project=None,
        provenance=Provenance(project="second-project", session_id="s1"),
        wait=5.0,
    )


def test_a_confirmation_raises_support_instead_of_adding_a_row(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    [known] = memory.list(limit=5)[0]
    with FakeAnthropic(model=MODEL) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        api = replace(settings, anthropic_api_key=API_KEY, distill_model=MODEL)
        fake.reply_json(Judgement(outcome="success", reason="the new test passes"))
        # An id it was not shown counts for nothing, however it is spelt.
        fake.reply_with(lambda r: confirming(r, fake, ["ins_0000000000000000"]))

        learned = learn_with(memory, AnthropicBackend(api))

        distill_request = fake.message_requests[1]
    assert f"- {known.id}: {known.title}" in distill_request.user_text
    assert "put its id in `confirms`" in distill_request.user_text
    schema = distill_request.body["output_config"]["format"]["schema"]
    assert set(schema["properties"]) == {"insights", "confirms"}
    assert learned.distilled.confirmed == [known.id]
    assert [(r.status, r.id) for r in learned.results][-1] == ("merged", known.id)
    confirmed = memory.get(known.id)
    assert confirmed.support == 2
    assert set(confirmed.projects) == {"first-project", "second-project"}
    titles = sorted(i.title for i in memory.list(limit=10)[0])
    assert titles == sorted([KNOWN["title"], NEW["title"]])  # one new row, not two


def test_an_openai_compatible_model_confirms_the_same_way(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    [known] = memory.list(limit=5)[0]
    with FakeChat() as fake:
        monkeypatch.setenv("MTL_MCP_OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("MTL_MCP_OPENAI_MODEL", CHAT_MODEL)
        settings = load_settings()
        fake.answers["DistilledInsights"] = {"insights": [], "confirms": [known.id]}

        learned = learn_with(memory, OpenAIBackend(settings))

        [request] = [r for r in fake.chat_requests if "confirms" in str(r.body)][-1:]
    assert known.id in str(request.body["messages"])
    assert learned.stored == 0 and learned.distilled.confirmed == [known.id]
    assert memory.get(known.id).support == 2
    assert len(memory.list(limit=10)[0]) == 1


def test_nothing_known_means_nothing_listed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty memory shows the distiller no list (and the prompt says nothing of one)."""
    memory = Memory(settings)
    assert memory.nearest(DIGEST) == []
    with FakeAnthropic(model=MODEL) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        api = replace(settings, anthropic_api_key=API_KEY, distill_model=MODEL)
        fake.reply_json(Judgement(outcome="success", reason="the new test passes"))
        fake.reply_json({"insights": [NEW], "confirms": []})
        learned = learn_with(memory, AnthropicBackend(api))
        assert "confirms" not in fake.message_requests[1].user_text
    assert learned.stored == 1
    memory.close()


def test_a_confirmation_through_the_service_reaches_its_memory(memory: Memory) -> None:
    """The service's library calls answer `nearest` and `confirm` like Memory does."""
    import anyio

    from mtl_mcp.server.calls import answer_call
    from mtl_mcp.server.keeper import MemoryKeeper

    keeper = MemoryKeeper(memory.settings, memory)
    [known] = memory.list(limit=5)[0]

    async def both() -> tuple[Any, Any]:
        near = await answer_call(keeper, "nearest", {"text": DIGEST, "k": 3})
        confirmed = await answer_call(
            keeper,
            "confirm",
            {"ids": [known.id, "ins_0000000000000000"], "provenance": {"project": "p"}},
        )
        return near, confirmed

    near, confirmed = anyio.run(both)
    assert near["ok"] and near["result"][0]["id"] == known.id
    assert [r["status"] for r in confirmed["result"]] == ["merged", "rejected"]
    assert memory.get(known.id).support == 2
