"""Every page of the dashboard in Debian's Chromium, against a real `mtl-mcp ui`; each change
made in the browser is checked through the CLI, and a CLI change reaches the open page."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from mtl_mcp.config import load_settings
from mtl_mcp.index.gate import UNASKED_TOP_K, unasked_positions
from tests.dashboard.conftest import PLAN, SESSION, Dashboard, wait_until, watch

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TITLES = "table[aria-label=Insights] tbody tr td:first-child a"


def shown_count(page: Any) -> str:
    return str(page.locator("#count").inner_text())


def open_insight(page: Any, dashboard: Dashboard, insight: str) -> None:
    page.goto(f"{dashboard.base}/#/insight/{insight}")
    page.wait_for_selector("#edit")


def test_browse_filters_searches_sorts_and_pages_on_the_server(
    page: Any, dashboard: Dashboard
) -> None:
    """The first page shows 25 of the memory; a filter, a search and a sort give what
    `mtl-mcp list` gives for them; Next shows the following page."""
    total = dashboard.cli_json("list", "--limit", "1")["total"]
    assert shown_count(page) == f"1-25 of {total}"
    assert page.locator("table[aria-label=Insights] tbody tr").count() == 25
    page.get_by_role("button", name="Next →").click()
    expect(page.locator("#count")).to_have_text(re.compile(r"^26-"))

    page.get_by_label("Domain").select_option("databases")
    expected = dashboard.cli_json("list", "--domain", "databases", "--limit", "100")
    expect(page.locator("#count")).to_have_text(re.compile(f"of {expected['total']}$"))
    titles = page.locator(TITLES).all_inner_texts()
    assert sorted(titles) == sorted(i["title"] for i in expected["items"])

    page.get_by_label("Search").fill("index")
    expect(page).to_have_url(re.compile("text=index"))
    exported = [json.loads(line) for line in dashboard.cli("export").stdout.splitlines()]
    holding = {
        i["title"]
        for i in exported
        if i["domain"] == "databases"
        and "index" in f"{i['title']} {i['description']} {i['content']}".lower()
    }
    assert 0 < len(holding) < expected["total"]
    expect(page.locator("#count")).to_have_text(re.compile(f"of {len(holding)}$"))
    assert set(page.locator(TITLES).all_inner_texts()) == holding
    assert page.evaluate("document.activeElement.id") == "f-text"  # typing goes on

    page.get_by_label("Sort").select_option("support")
    expect(page).to_have_url(re.compile("sort=support"))
    assert page.get_by_label("Domain").input_value() == "databases"


def test_the_plan_preview_matches_cli_recall(page: Any, dashboard: Dashboard) -> None:
    """Try a plan shows the ids, order, scores and relevance gate probabilities that
    `mtl-mcp recall --json` gives for the same plan, with each hit's meaning and keyword
    parts, whether it would be shown on its own, and the notes text."""
    cli = dashboard.cli_json("recall", PLAN, "-k", "5", "--project", "none-such")
    page.get_by_role("link", name="Try a plan", exact=True).click()
    page.get_by_role("textbox", name=re.compile("^Plan")).fill(PLAN)
    page.get_by_label("How many").select_option("5")
    page.get_by_role("button", name="Recall").click()
    page.wait_for_selector("#notes")
    table = page.locator("table[aria-label='Recalled insights'] tbody tr")
    links = table.locator("td:nth-child(2) a")
    ids = [href.rsplit("/", 1)[1] for href in links.evaluate_all("l => l.map(a => a.hash)")]
    assert ids == [hit["id"] for hit in cli["results"]]
    scores = table.locator("td.score").all_inner_texts()
    assert scores == [f"{hit['score']:.3f}" for hit in cli["results"]]
    first = table.nth(0).locator("td").all_inner_texts()
    assert float(first[3]) == pytest.approx(cli["results"][0]["similarity"], abs=1e-3)
    assert first[6] != "—"  # the plan's words matched: a BM25 part
    shown = table.locator("td.shown").all_inner_texts()
    min_p = load_settings(dashboard.home).auto_recall_min_p
    # What the plan hook would inject: the most probable of the top 3, if it passes.
    chosen = unasked_positions([hit["p"] for hit in cli["results"][:UNASKED_TOP_K]], min_p)
    assert shown == [
        f"{'yes' if n in chosen else 'no'}, p = {hit['p']:.2f}"
        for n, hit in enumerate(cli["results"])
    ]
    notes = page.locator("#notes").inner_text()
    assert all(hit["id"] in notes for hit in cli["results"])


def test_an_insight_shows_provenance_feedback_and_plans(page: Any, dashboard: Dashboard) -> None:
    """The insight the seeded session was given and judged: its support, the plan it was
    recalled for and the verdict."""
    judged = dashboard.cli_json("sessions")
    report = next(s for s in judged if s["session_id"] == SESSION)
    insight = report["verdicts"][0]["insight"]
    open_insight(page, dashboard, insight)
    assert "session produced or confirmed it" in page.inner_text("main")
    recalls = page.locator("table[aria-label='Plans it was recalled for']").inner_text()
    assert PLAN[:40] in recalls
    verdicts = page.locator("table[aria-label='Feedback history']").inner_text()
    assert "helped" in verdicts
    assert "it said to measure first" in verdicts


def test_edit_is_linted_and_embedded_again(page: Any, dashboard: Dashboard) -> None:
    """A good edit is stored (the CLI shows it, and recall finds it by its new words); a
    bad one is rejected with the lint's reasons and changes nothing."""
    insight = dashboard.cli_json("list", "--domain", "mobile", "--limit", "1")["items"][0]
    open_insight(page, dashboard, insight["id"])
    new_title = "Pin flaky emulator clocks before timing assertions"
    page.get_by_label("title", exact=True).fill(new_title)
    page.get_by_role("button", name="Save edit").click()
    page.wait_for_selector("text=Saved: linted and embedded again.")
    shown = dashboard.cli_json("show", insight["id"])
    assert shown["title"] == new_title
    assert shown["support"] == insight["support"]
    hits = dashboard.cli_json(
        "recall", "pin the emulator clock before timing assertions", "-k", "1"
    )
    assert hits["results"][0]["id"] == insight["id"]

    secret = "sk-ant-api03-Xk29dLq8Rz7Vb3Nw5Tp1Mh6Jc4Gf0Ys2Ue9Oa"
    page.get_by_label("content", exact=True).fill(f"Export ANTHROPIC_API_KEY={secret} first.")
    page.get_by_role("button", name="Save edit").click()
    alert = page.locator("#edit-result")
    alert.get_by_text("Rejected: nothing was changed.").wait_for()
    assert "contains a secret" in alert.locator("ul.reasons").inner_text()
    assert secret not in page.content()  # the textarea holds it; nothing shown echoes it
    assert dashboard.cli_json("show", insight["id"])["content"] == shown["content"]


def test_rate_retire_restore_round_trip_through_the_cli(page: Any, dashboard: Dashboard) -> None:
    """Helpful and harmful ratings, a retirement and a restore, each seen by the CLI."""
    insight = dashboard.cli_json("list", "--domain", "frontend", "--limit", "1")["items"][0]
    open_insight(page, dashboard, insight["id"])
    page.get_by_label("Note").fill("caught a real bug")
    page.get_by_role("button", name="Helpful", exact=True).click()
    wait_until(lambda: dashboard.cli_json("show", insight["id"])["helpful"] == 1)
    page.get_by_role("button", name="Harmful", exact=True).click()
    wait_until(lambda: dashboard.cli_json("show", insight["id"])["harmful"] == 1)
    page.get_by_label("Reason").fill("outdated")
    page.get_by_role("button", name="Retire").click()
    page.get_by_role("button", name="Restore").wait_for()
    assert dashboard.cli_json("show", insight["id"])["status"] == "retired"
    page.get_by_role("button", name="Restore").click()
    page.get_by_role("button", name="Retire").wait_for()
    assert dashboard.cli_json("show", insight["id"])["status"] == "active"


def test_forget_needs_a_confirmation(page: Any, dashboard: Dashboard) -> None:
    """Cancel keeps the insight; Confirm forgets it (the CLI no longer finds it)."""
    insight = dashboard.cli_json("list", "--domain", "security", "--limit", "1")["items"][0]
    open_insight(page, dashboard, insight["id"])
    page.get_by_role("button", name="Forget…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    assert dashboard.cli("show", insight["id"]).returncode == 0
    page.get_by_role("button", name="Forget…").click()
    dialog.get_by_role("button", name="Forget").click()
    expect(page).to_have_url(re.compile("#/browse$"))
    gone = dashboard.cli("show", insight["id"], check=False)
    assert gone.returncode == 1
    assert "no insight" in gone.stderr.lower()


def test_sessions_show_recalls_verdicts_queue_and_spend(page: Any, dashboard: Dashboard) -> None:
    """The seeded session, the failed job with why (retry queues it again, as `mtl-mcp
    queue` then shows), and today's spend by backend against the budgets."""
    page.get_by_role("link", name="Sessions", exact=True).click()
    session = page.locator("details.session", has_text=SESSION)
    session.locator("summary").click()
    assert "helped" in session.inner_text()
    assert PLAN[:30] in session.inner_text()
    report = next(s for s in dashboard.cli_json("sessions") if s["session_id"] == SESSION)
    given = session.locator("li", has_text=PLAN[:30]).get_by_role("link").all_inner_texts()
    assert given == [report["titles"][h["id"]] for h in report["recalls"][0]["hits"]]
    queue = page.locator("table[aria-label='Distillation queue']").inner_text()
    assert "failed" in queue
    assert "the distillation backend timed out" in queue
    spend = page.locator("table[aria-label='Spend by backend']").inner_text()
    assert "api" in spend
    assert "1200" in spend
    assert "claude-code" in spend
    assert "subscription's own" in spend
    page.get_by_role("button", name="Retry failed (1)").click()
    page.get_by_text("Requeued 1 job(s).").wait_for()
    assert "pending" in dashboard.cli("queue").stdout


def test_the_map_shows_the_figures_and_opens_a_dot(page: Any, dashboard: Dashboard) -> None:
    """LISI and DBI as `mtl-mcp map` reports them; colour by category; a click on a dot,
    or the keyboard, opens that insight."""
    page.get_by_role("link", name="Map", exact=True).click()
    page.wait_for_selector("canvas.map")
    assert float(page.locator("#lisi").inner_text()) > 1.0
    assert float(page.locator("#dbi").inner_text()) > 0.0
    page.get_by_label("Colour by").select_option("category")
    assert "algorithmic-strategy" in page.locator(".legend").inner_text()
    canvas = page.locator("canvas.map")
    canvas.focus()
    page.keyboard.press("ArrowRight")
    assert "Enter opens it" in page.locator("#map-focus").inner_text()
    page.keyboard.press("Enter")
    page.wait_for_selector("#edit")
    page.go_back()
    page.wait_for_selector("canvas.map")
    data = page.evaluate(
        "fetch('/api/map', {headers: {'x-mtl-session': sessionStorage.getItem('mtl-session')}})"
        ".then(r => r.json())"
    )
    page.mouse.click(*first_dot(data, canvas.bounding_box()))
    expect(page).to_have_url(re.compile(f"#/insight/{data['points'][0]['id']}$"))
    page.wait_for_selector("#edit")


def first_dot(data: dict[str, Any], box: dict[str, float]) -> tuple[float, float]:
    """Where the map's first dot is on screen: its data scaled into the canvas."""
    xs = [p["x"] for p in data["points"]]
    ys = [p["y"] for p in data["points"]]
    pad = 16
    p = data["points"][0]
    x = pad + (p["x"] - min(xs)) * (box["width"] - 2 * pad) / (max(xs) - min(xs))
    y = box["height"] - pad - (p["y"] - min(ys)) * (box["height"] - 2 * pad) / (max(ys) - min(ys))
    return box["x"] + x, box["y"] + y


def test_a_cli_add_reaches_the_open_page_without_a_reload(page: Any, dashboard: Dashboard) -> None:
    """Server-Sent Events: the browse page's count and rows change after `mtl-mcp add`."""
    expect(page.locator("#live")).to_have_text("live")
    before = dashboard.cli_json("list", "--limit", "1")["total"]
    assert shown_count(page).endswith(f"of {before}")
    page.evaluate("window.notReloaded = true")
    dashboard.cli(
        "add",
        "--title", "Read the changelog before a major upgrade",
        "--description", "When a dependency jumps a major version.",
        "--content", "Breaking changes are listed there; scanning it first turns a day of "
        "debugging into a checklist.",
        "--domain", "devops-shell",
    )  # fmt: skip
    expect(page.locator("#count")).to_have_text(re.compile(f"of {before + 1}$"))
    assert page.evaluate("window.notReloaded") is True
    assert page.get_by_text("Read the changelog before a major upgrade").is_visible()
    assert page.locator("#live").inner_text().startswith("updated")


def test_every_control_has_a_label_and_the_keyboard_reaches_the_pages(
    page: Any, dashboard: Dashboard
) -> None:
    """No unlabelled input, select, textarea or button on any page; Tab reaches the nav."""
    for where in ("#/browse", "#/plan", "#/sessions", "#/map"):
        page.goto(f"{dashboard.base}/{where}")
        page.wait_for_selector("main h1")
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('main input, main select, main textarea,'
                + ' main button')].filter(e => !(e.labels && e.labels.length)
                && !e.getAttribute('aria-label') && !e.textContent.trim()).map(e => e.outerHTML)"""
        )
        assert unlabelled == [], where
    page.goto(f"{dashboard.base}/#/browse")
    page.reload()
    page.wait_for_selector("main h1")
    page.keyboard.press("Tab")  # the skip link
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Browse"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_selector("#plan")


def test_a_reload_keeps_the_tab_signed_in_and_a_new_tab_needs_a_new_link(
    page: Any, browser: Any, dashboard: Dashboard
) -> None:
    """The link leaves the address bar at once; a reload, and Back from another page, keep
    the session; a tab that has none (a link of the page opened in a new tab, too), or a
    link used already, shows how to get a new link and nothing of the memory; `mtl-mcp ui`
    again gives a link that opens."""
    assert "code=" not in page.url
    page.goto(f"{dashboard.base}/#/sessions")
    page.reload()
    page.wait_for_selector("details.session")
    page.goto("about:blank")
    page.go_back()
    page.wait_for_selector("details.session")
    with page.context.expect_page() as opened_tab:  # a link of the page, in a new tab
        page.get_by_role("link", name="Browse").click(modifiers=["Control"])
    new_tab = opened_tab.value
    new_tab.get_by_role("heading", name="Open a new link to the dashboard").wait_for()
    new_tab.close()
    link = dashboard.new_link()
    for opened, works in ((link, True), (link, False), (f"{dashboard.base}/", False)):
        context = browser.new_context()
        tab = context.new_page()
        errors = watch(tab)
        tab.goto(opened)
        if works:
            tab.wait_for_selector("table[aria-label=Insights] tbody tr")
            assert errors == []
        else:
            tab.get_by_role("heading", name="Open a new link to the dashboard").wait_for()
            assert "run `mtl-mcp ui` again" in tab.inner_text("main")
            assert tab.locator("table").count() == 0
        assert "code=" not in tab.url
        context.close()
