"""Screenshots of the dashboard's main pages for docs/images/, taken by Chromium.

    python bench/dashboard_screenshots.py [--out docs/images]

A throwaway data directory gets the memory the dashboard tests use (the starter pack, a
judged session, a failed job, some spend: tests/dashboard/conftest.py `seed_demo`), then
`mtl-mcp ui --no-browser` serves it and each page is captured at a laptop's width.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard import CHROMIUM, ROOT, Launched, stop_service

from tests.dashboard.conftest import PLAN, SESSION, seed_demo

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

VIEWPORT: ViewportSize = {"width": 1200, "height": 760}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="mtl-shots-") as work, sync_playwright() as pw:
        home = Path(work) / "home"
        seed_demo(home)
        board = Launched(home)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            board.sign_in(page)
            page.screenshot(path=args.out / "dashboard-browse.png")

            page.goto(f"{board.base}/#/plan")
            page.fill("#plan", PLAN)
            for _ in range(2):  # the second shows a warm recall's time
                page.get_by_role("button", name="Recall").click()
                page.wait_for_selector("#notes")
            page.screenshot(path=args.out / "dashboard-plan.png")

            page.locator("table[aria-label='Recalled insights'] a").first.click()
            page.wait_for_selector("#edit")
            page.screenshot(path=args.out / "dashboard-insight.png")

            page.goto(f"{board.base}/#/sessions")
            page.locator("details.session", has_text=SESSION).locator("summary").click()
            page.screenshot(path=args.out / "dashboard-sessions.png")

            dark = browser.new_page(viewport=VIEWPORT, color_scheme="dark")
            board.sign_in(dark)
            dark.goto(f"{board.base}/#/map")
            dark.wait_for_selector("canvas.map")
            dark.wait_for_timeout(300)
            dark.screenshot(path=args.out / "dashboard-map-dark.png")
        finally:
            browser.close()
            board.close()
            stop_service(home)
    for shot in args.out.glob("dashboard-*.png"):
        small(shot)
    print(f"wrote {args.out}/dashboard-*.png", file=sys.stderr)


def small(shot: Path) -> None:
    """128 colours are plenty for a page of text: a third of the size (with Pillow, which
    the `map` extra brings; without it the PNG stays as Chromium wrote it)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(shot) as image:
        reduced = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    reduced.save(shot, optimize=True)


if __name__ == "__main__":
    main()
