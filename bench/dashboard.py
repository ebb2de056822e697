"""The dashboard's targets, measured on a real `mtl-mcp ui` inside the real service.

    python bench/dashboard.py [--quick] [--reps 15] [--out bench-results/dashboard.json]

For each size (10k and 100k insights; 2k and 10k with --quick) a store is filled with
synthetic rows and random unit vectors written straight through the storage layer
(bench/benchmark.py's `fill_store`: embedding 100k texts would take an hour and measure the
model, not the dashboard). Then, with the service and its dashboard running:

- search and filter: `/api/insights` for a text search, a filter, both with a sort, and the
  first page; the server time is what the route itself took (`server_ms`), and the wall
  time of the HTTP round trip is reported beside it;
- first page usable (smallest size and 10k): Chromium navigates to the dashboard (the tab
  signed in already, as on a reload) and the page marks `mtl-first-page-usable` once the
  browse table is drawn; its time from navigation start is read from the Performance API;
- plan preview: `/api/preview` round trips against recall through the service's own call
  door (`ServiceMemory.recall`, what `mtl-mcp recall` uses), for the same plans;
- memory (10k): the service's resident memory warmed by recalls and a listing, then with the
  dashboard open in Chromium after every page was visited, several previews and the map
  drawn, its live feed connected; and the resident memory of the dashboard run beside the
  service instead (`MTL_MCP_SERVICE=off mtl-mcp ui`, its own model and snapshot) after the
  same visits.

Figures are medians of one run. Results go to bench-results/dashboard.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import httpx

from mtl_mcp.config import load_settings
from mtl_mcp.dashboard.guard import SESSION_HEADER
from mtl_mcp.server.calls import ServiceMemory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import PLANS, fill_store, rss_mb

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
QUERIES = {
    "first page": {},
    "text search": {"text": "lesson 12"},
    "filter": {"domain": "domain-3", "category": "workflow-discipline"},
    "filter + text + sort": {"domain": "domain-3", "text": "lesson 4", "sort": "support"},
    "project + rating": {"project": "project-7", "rating": "unrated", "sort": "oldest"},
    "page 40": {"offset": "1000"},
}


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTL_MCP_")}
    env.update(MTL_MCP_HOME=str(home), MTL_MCP_STARTER="0", **extra)
    return env


class Launched:
    """`mtl-mcp ui --no-browser` for a data directory: its links, and an HTTP client with
    the session a link gives, as the page holds it."""

    def __init__(self, home: Path, **extra: str) -> None:
        self.home, self.extra = home, extra
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mtl_mcp", "ui", "--no-browser", "--home", str(home)],
            env=environment(home, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().split(": ", 1)[1].strip()
        self.base = self.url.split("/?", 1)[0]
        self.unused = [self.url]
        self._http: httpx.Client | None = None

    def link(self) -> str:
        """A one-time link not used yet: the printed one, then `mtl-mcp ui` again's."""
        if self.unused:
            return self.unused.pop()
        again = subprocess.run(
            [sys.executable, "-m", "mtl_mcp", "ui", "--no-browser", "--home", str(self.home)],
            env=environment(self.home, **self.extra),
            capture_output=True,
            text=True,
            check=True,
        )
        return again.stdout.split(": ", 1)[1].strip()

    def sign_in(self, page: Any) -> None:
        """Open a link in `page`: its tab holds the session from then on, reloads too."""
        page.goto(self.link())
        page.wait_for_selector("table[aria-label=Insights] tbody tr", timeout=120_000)

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            code = self.link().split("code=", 1)[1]
            session = httpx.post(
                f"{self.base}/api/session",
                json={"code": code},
                headers={"origin": self.base},
                timeout=120,
            ).json()["session"]
            self._http = httpx.Client(
                base_url=self.base,
                headers={"origin": self.base, SESSION_HEADER: session},
                timeout=120,
            )
        return self._http

    def get(self, path: str, **params: Any) -> tuple[dict[str, Any], float]:
        start = time.perf_counter()
        answer = self.http.get(path, params=params)
        wall = (time.perf_counter() - start) * 1000
        answer.raise_for_status()
        return answer.json(), wall

    def preview(self, plan: str) -> tuple[dict[str, Any], float]:
        start = time.perf_counter()
        answer = self.http.post("/api/preview", json={"plan": plan, "k": 3})
        wall = (time.perf_counter() - start) * 1000
        answer.raise_for_status()
        return answer.json(), wall

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        self.process.terminate()
        self.process.wait(10)
        if self.process.stdout:
            self.process.stdout.close()


def service_pid(home: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "mtl_mcp", "service", "status", "--json", "--home", str(home)],
        env=environment(home),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(json.loads(done.stdout)["services"][0]["pid"])


def stop_service(home: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "mtl_mcp", "service", "stop", "--home", str(home)],
        env=environment(home),
        capture_output=True,
        check=False,
    )


def bench_queries(board: Launched, reps: int) -> dict[str, Any]:
    figures = {}
    for name, params in QUERIES.items():
        board.get("/api/insights", **params)  # the first answer loads nothing new: warm
        server, wall, total = [], [], 0
        for _ in range(reps):
            data, ms = board.get("/api/insights", **params)
            server.append(data["server_ms"])
            wall.append(ms)
            total = data["total"]
        figures[name] = {"server_ms": median(server), "wall_ms": median(wall), "matches": total}
    return figures


def visit_everything(page: Any, board: Launched, plans: list[str], pid: int) -> dict[str, Any]:
    """Every page, several previews, the map drawn: what a person does in a first look; the
    resident memory of process `pid` after each step."""
    steps: dict[str, Any] = {}
    page.goto(f"{board.base}/#/browse")
    page.wait_for_selector("table[aria-label=Insights] tbody tr")
    page.get_by_label("Search").fill("lesson 3")
    page.wait_for_timeout(600)
    steps["browse and search"] = rss_mb(pid)
    page.goto(f"{board.base}/#/plan")
    page.wait_for_selector("#plan")
    for plan in plans:
        page.fill("#plan", plan)
        page.get_by_role("button", name="Recall").click()
        page.wait_for_selector("#notes")
    steps["plan previews"] = rss_mb(pid)
    page.goto(f"{board.base}/#/sessions")
    page.wait_for_selector("main h1")
    steps["sessions"] = rss_mb(pid)
    page.goto(f"{board.base}/#/map")
    page.wait_for_selector("#lisi", timeout=120_000)
    steps["map"] = rss_mb(pid)
    page.goto(f"{board.base}/#/browse")
    page.wait_for_selector("table[aria-label=Insights] tbody tr")
    page.wait_for_timeout(2000)  # the live feed polls meanwhile
    steps["back to browse, live feed open"] = rss_mb(pid)
    return steps


def first_page_usable(browser: Any, board: Launched, reps: int) -> dict[str, Any]:
    context = browser.new_context()
    page = context.new_page()
    board.sign_in(page)  # then each navigation is a reload's: the tab has its session
    samples = []
    for _ in range(reps + 1):
        page.goto(f"{board.base}/")
        page.wait_for_selector("table[aria-label=Insights] tbody tr")
        mark = page.evaluate("performance.getEntriesByName('mtl-first-page-usable')[0].startTime")
        samples.append(mark)
    context.close()
    return {"median_ms": median(samples[1:]), "max_ms": round(max(samples[1:]), 1)}


def bench_previews(board: Launched, home: Path, reps: int) -> dict[str, Any]:
    service = ServiceMemory(load_settings(home, starter=False))
    plans = PLANS[: max(3, min(len(PLANS), reps))]
    for plan in plans:  # warm both
        service.recall(plan, k=3)
        board.preview(plan)
    recall, preview, inside, server = [], [], [], []
    for _ in range(max(1, reps // len(plans))):
        for plan in plans:
            start = time.perf_counter()
            service.recall(plan, k=3)
            recall.append((time.perf_counter() - start) * 1000)
            data, ms = board.preview(plan)
            preview.append(ms)
            inside.append(data["seconds"] * 1000)
            server.append(data["server_ms"])
    return {
        "recall_ms": median(recall),
        "preview_ms": median(preview),
        "preview_minus_recall_ms": round(median(preview) - median(recall), 2),
        "ranking_inside_preview_ms": median(inside),
        "preview_route_ms": median(server),
        "samples": len(preview),
    }


def bench_memory(browser: Any, home: Path) -> dict[str, Any]:
    """The service warmed without a dashboard, then with one open; then the dashboard
    beside the service instead, in its own process."""
    stop_service(home)
    settings = load_settings(home, starter=False)
    warm = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "service", "--home", str(home)],
        env=environment(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while ServiceMemory.running(settings) is None:
            time.sleep(0.2)
        service = ServiceMemory(settings)
        for plan in PLANS[:6]:
            service.recall(plan, k=3)
        service.list(limit=25)
        service.stats()
        time.sleep(1)
        pid = service_pid(home)
        before = rss_mb(pid) or 0.0
        board = Launched(home)
        context = browser.new_context()
        page = context.new_page()
        board.sign_in(page)
        steps = visit_everything(page, board, PLANS[:4], pid)
        after = rss_mb(pid) or 0.0
        peak = rss_mb(pid, "VmHWM")
        context.close()
        board.close()
    finally:
        warm.terminate()
        warm.wait(30)
    stop_service(home)
    beside = Launched(home, MTL_MCP_SERVICE="off")
    context = browser.new_context()
    page = context.new_page()
    beside.sign_in(page)
    visit_everything(page, beside, PLANS[:4], beside.process.pid)
    own = rss_mb(beside.process.pid) or 0.0
    context.close()
    beside.close()
    return {
        "service_rss_mb_before": before,
        "service_rss_mb_with_dashboard_open": after,
        "extra_mb": round(after - before, 1),
        "service_rss_mb_by_step": steps,
        "service_peak_mb": peak,
        "beside_process_rss_mb": own,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2k and 10k, fewer reps.")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "dashboard.json")
    args = parser.parse_args()
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    reps = 5 if args.quick else args.reps

    from playwright.sync_api import sync_playwright

    results: dict[str, Any] = {"sizes": {}, "reps": reps, "cpu_count": os.cpu_count()}
    with (
        tempfile.TemporaryDirectory(prefix="mtl-bench-dashboard-") as work,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for size in sizes:
            home = Path(work) / f"home-{size}"
            start = time.perf_counter()
            fill_store(home, size)
            print(f"{size}: filled in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            board = Launched(home)
            try:
                figures: dict[str, Any] = {"queries": bench_queries(board, reps)}
                if size <= 10_000:
                    figures["first_page_usable"] = first_page_usable(browser, board, reps)
                    figures["plan_preview"] = bench_previews(board, home, reps * 2)
            finally:
                board.close()
            if size == 10_000:
                figures["memory"] = bench_memory(browser, home)
            stop_service(home)
            results["sizes"][str(size)] = figures
            print(json.dumps({size: figures}, indent=1), file=sys.stderr)
        browser.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
