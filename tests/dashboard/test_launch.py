"""`mtl-mcp ui` itself: it opens the browser unless told not to, and a taken --port is a
clear error. Both ask the service the other tests' dashboard runs in for another one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.dashboard.conftest import Dashboard, wait_until

pytestmark = pytest.mark.slow


def test_ui_opens_the_browser_on_the_printed_url(dashboard: Dashboard, tmp_path: Path) -> None:
    """Without --no-browser the URL goes to the browser ($BROWSER here, a script that
    writes it down); the second dashboard of the same service has its own port and token."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    process = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "ui", "--home", str(dashboard.home)],
        env={**dashboard.env, "BROWSER": f"{browser} %s", "DISPLAY": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = process.stdout.readline().split(": ", 1)[1].strip()
        assert wait_until(lambda: opened.exists() and opened.read_text()) == printed
        assert printed.split("?")[0] != f"{dashboard.base}/"
        assert printed.split("token=")[1] != dashboard.token
        with httpx.Client(follow_redirects=True) as http:
            assert http.get(printed).status_code == 200
        with httpx.Client() as http:  # the other dashboard's token opens nothing here
            assert http.get(f"{printed.split('?')[0]}?token={dashboard.token}").status_code == 401
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout:
            process.stdout.close()


def test_a_taken_port_is_a_clear_error(dashboard: Dashboard) -> None:
    """--port on a port in use: exit 1, the project's words, no traceback."""
    done = dashboard.cli("ui", "--no-browser", "--port", str(dashboard.port), check=False)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{dashboard.port}" in done.stderr
    assert "pick another --port" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
