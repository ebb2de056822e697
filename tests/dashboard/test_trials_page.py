"""The Trials page in Debian's Chromium, against a real `mtl-mcp ui`: the list of trials,
one trial's report, and its harms, each with a link to the insight and a one-click retire
through the insight's own retire action (the CLI sees it). The trial is written by the
trials library itself (its spec and ledger of runs), as `mtl-mcp trial run` leaves one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from mtl_mcp.trials.records import RunRecord, TrialFiles, TrialSpec
from tests.dashboard.conftest import Dashboard, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TRIAL = "261201-d4sh"


def write_trial(dashboard: Dashboard, harmful: str) -> None:
    """A complete trial of two tasks: memory failed `slugify` where none passed, after it
    was shown `harmful`; both passed `merge`."""
    files = TrialFiles(dashboard.home, TRIAL)
    files.create(TrialSpec(
        id=TRIAL, client="claude-code", client_version="2.1.332", suite="builtin",
        suite_path="builtin", arms=["none", "memory"], runs=1, tasks=["slugify", "merge"],
        domains={"slugify": "text", "merge": "algorithms"}, seed=1, status="complete",
    ))  # fmt: skip
    now = datetime.now(UTC)
    outcomes = [("slugify", "none", True, []), ("slugify", "memory", False, [harmful]),
                ("merge", "memory", True, []), ("merge", "none", True, [])]  # fmt: skip
    for slot, (task, arm, passed, shown) in enumerate(outcomes):
        files.add_run(RunRecord(
            slot=slot, task=task, domain="text", arm=arm, run=0, passed=passed,
            tokens_in=1000, tokens_out=100, started_at=now, ended_at=now, recalled=shown,
            store="memory" if arm == "memory" else None,
        ))  # fmt: skip


def test_the_trials_api_is_behind_the_guard(dashboard: Dashboard) -> None:
    with httpx.Client(base_url=dashboard.base) as http:
        for path in ("/api/trials", f"/api/trials/{TRIAL}"):
            assert http.get(path).status_code == 401, path
    with httpx.Client(base_url=dashboard.base, headers=dashboard.headers) as http:
        missing = http.get("/api/trials/no-such-trial")
        assert missing.status_code == 404 and "mtl-mcp trial list" in missing.json()["error"]
        assert http.get("/api/trials/..").status_code in (400, 404)


def test_the_trials_page_lists_reports_and_retires_a_harm_in_one_click(
    page: Any, dashboard: Dashboard
) -> None:
    insight = dashboard.cli_json("list", "--domain", "mobile", "--limit", "1")["items"][0]
    write_trial(dashboard, insight["id"])
    page.get_by_role("link", name="Trials", exact=True).click()
    row = page.locator("table[aria-label=Trials] tbody tr", has_text=TRIAL)
    expect(row).to_contain_text("complete")
    row.get_by_role("link", name=TRIAL).click()

    page.get_by_role("heading", name=f"Trial {TRIAL}").wait_for()
    arms = page.locator("table[aria-label=Arms]")
    expect(arms.locator("tr", has_text="memory")).to_contain_text("1/2")
    expect(arms.locator("tr", has_text="none")).to_contain_text("2/2")
    comparisons = page.locator("table[aria-label=Comparisons]")
    expect(comparisons).to_contain_text("memory vs none")
    harm = page.locator("table[aria-label=Harms] tbody tr", has_text="slugify")
    expect(harm.get_by_role("link", name=insight["title"])).to_have_attribute(
        "href", f"#/insight/{insight['id']}"
    )
    expect(harm).to_contain_text(f"mtl-mcp show {insight['id']}")
    harm.get_by_role("button", name="Retire").click()
    wait_until(lambda: dashboard.cli_json("show", insight["id"])["status"] == "retired")
    expect(harm).to_contain_text("retired")
    expect(page.locator("#message")).to_contain_text("Retired")

    harm.get_by_role("link", name=insight["title"]).click()
    page.get_by_role("button", name="Restore").click()  # the insight page undoes it
    page.get_by_role("button", name="Retire").wait_for()
    assert dashboard.cli_json("show", insight["id"])["status"] == "active"
