"""The upkeep page in Debian's Chromium, against the real `mtl-mcp ui`: a preview changes
nothing, a pass merges the wordings of one lesson and shows why, a retired wording says
why, and undo (after a confirmation) brings every insight back; each step checked through
the CLI."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import Dashboard

pytestmark = [pytest.mark.slow, pytest.mark.browser]

# Three sessions' wordings of one lesson (cosine 0.83-0.86: below write-time dedup).
WORDINGS = [
    (
        "Reproduce a failure with a test before fixing it",
        "When a bug report describes wrong behaviour.",
        "Write a test that shows the reported failure and watch it fail before touching the "
        "code. The failing test proves the report is understood, and later proves the fix.",
    ),
    (
        "Write a failing test for a reported bug first",
        "Applies when someone reports that the code misbehaves.",
        "Before changing any code, capture the reported behaviour in an automated test and "
        "see it fail. It shows the problem is understood, and the same test confirms the "
        "repair.",
    ),
]


def test_a_pass_is_previewed_run_explained_and_undone(page: Any, dashboard: Dashboard) -> None:
    ids = []
    for title, description, content in WORDINGS:
        added = dashboard.cli_json(
            "add", "--title", title, "--description", description, "--content", content
        )
        ids.append(added["id"])
    before = {i: dashboard.cli_json("show", i)["status"] for i in ids}
    assert set(before.values()) == {"active"}

    page.get_by_role("link", name="Upkeep").click()
    expect(page.get_by_role("heading", name="Upkeep")).to_be_visible()
    page.get_by_role("button", name="Preview a pass").click()
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Merged")
    expect(preview).to_contain_text(WORDINGS[0][0])
    assert dashboard.cli_json("consolidate", "--list") == []  # a preview saves no run

    page.get_by_role("button", name="Run a pass now").click()
    expect(page.locator("#message")).to_contain_text(re.compile(r"run-\d{8}-\d{6}-\w+: merged"))
    [run] = dashboard.cli_json("consolidate", "--list")
    merged = {i for kept, members in run["merged"] for i in [kept, *members]}
    assert set(ids) <= merged
    statuses = {i: dashboard.cli_json("show", i)["status"] for i in ids}
    assert sorted(statuses.values()) == ["active", "retired"]
    details = page.locator(f"details#run-{run['run']}")
    details.locator("summary").click()
    expect(details).to_contain_text("wordings of one lesson")  # why it merged them

    details.get_by_role("button", name="Undo this run").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    assert dashboard.cli_json("consolidate", "--list")[0]["undone_at"] is None
    details.get_by_role("button", name="Undo this run").click()
    dialog.get_by_role("button", name="Undo").click()
    expect(page.locator("#message")).to_contain_text(f"Undid {run['run']}")
    assert dashboard.cli_json("consolidate", "--list")[0]["undone_at"] is not None
    assert {i: dashboard.cli_json("show", i)["status"] for i in ids} == before
    expect(page.locator(f"details#run-{run['run']}")).to_contain_text("undone")
    for insight in ids:  # as the other tests of the package found the memory
        dashboard.cli("forget", insight, "--yes")


# A lesson its ratings retired, and a later session's wording of it (cosine 0.89).
CONDEMNED = (
    "Never retry non-idempotent requests automatically",
    "When a client sends payments, orders or other requests with side effects.",
    "An automatic retry of a payment request that had in fact succeeded charged the customer "
    "twice. Never retry a request with side effects blindly: make it idempotent with a key "
    "first, or surface the timeout to the caller.",
)
AGAIN = (
    "Do not automatically retry requests that have side effects",
    "Applies when a client sends orders, payments or other writes that are not idempotent.",
    "A blind automatic retry of an order that had actually gone through created a duplicate "
    "order. Give such a request an idempotency key first, or report the timeout to the caller "
    "instead of retrying.",
)


def test_a_retired_wording_is_shown_with_why_and_undone(page: Any, dashboard: Dashboard) -> None:
    """A wording of a lesson its ratings retired is retired by the pass: the page says which
    lesson and why, and undo makes it active again."""
    ids = []
    for title, description, content in (CONDEMNED, AGAIN):
        added = dashboard.cli_json(
            "add", "--title", title, "--description", description, "--content", content
        )
        ids.append(added["id"])
        if len(ids) == 1:  # rated harmful until its ratings retire it
            while dashboard.cli_json("show", ids[0])["status"] == "active":
                dashboard.cli("rate", ids[0], "--harmful")
    old, again = ids

    page.get_by_role("link", name="Upkeep").click()
    page.get_by_role("button", name="Run a pass now").click()
    expect(page.locator("#message")).to_contain_text(re.compile(r"run-\d{8}-\d{6}-\w+: merged"))
    run = next(r for r in dashboard.cli_json("consolidate", "--list") if again in r["retired"])
    assert dashboard.cli_json("show", again)["status"] == "retired"
    details = page.locator(f"details#run-{run['run']}")
    details.locator("summary").click()
    expect(details.get_by_role("heading", name=re.compile(r"^Retired \(\d+\)"))).to_be_visible()
    item = details.locator("li.change.retired", has_text=AGAIN[0])
    expect(item).to_contain_text(f"a wording of {old}")
    expect(item).to_contain_text("ratings retired")

    details.get_by_role("button", name="Undo this run").click()
    page.get_by_role("dialog").get_by_role("button", name="Undo").click()
    expect(page.locator("#message")).to_contain_text(f"Undid {run['run']}")
    assert dashboard.cli_json("show", again)["status"] == "active"
    assert dashboard.cli_json("show", old)["status"] == "retired"  # the ratings' doing stays
    for insight in ids:
        dashboard.cli("forget", insight, "--yes")


def test_undo_needs_the_run_repeated_and_the_session(dashboard: Dashboard) -> None:
    """The page's undo is a mutation like the others: without the page's session the guard
    refuses it, from another origin too, and without `confirm` the route does."""
    import httpx

    run = "/api/consolidation/run-20250101-000000-ab12/undo"
    confirmed = {"confirm": "run-20250101-000000-ab12"}
    with httpx.Client(base_url=dashboard.base) as client:
        bare = client.post(run, json=confirmed, headers={"origin": dashboard.base})
        assert bare.status_code == 401
        foreign = client.post(
            run, json=confirmed, headers={**dashboard.headers, "origin": "http://127.0.0.1:1"}
        )
        assert foreign.status_code == 403
        unconfirmed = client.post(
            run, json={}, headers={**dashboard.headers, "origin": dashboard.base}
        )
        assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.json()["error"]
