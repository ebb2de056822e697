"""`mtl-mcp ui` itself: it opens the browser with no secret on the browser's command line,
`mtl-mcp ui` again gives a new link to the open dashboard, and a taken --port is a clear
error. Each asks the service the other tests' dashboard runs in."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from mtl_mcp.dashboard.guard import SESSION_HEADER
from tests.dashboard.conftest import Dashboard, code_of, redeem, wait_until

pytestmark = pytest.mark.slow
NOBODY = 65534

# What a browser does with what it is given: open it, follow the page's refresh, and run
# the page's sign-in (trade the code for the session, list the memory). First it waits,
# so that the test can read its command line from /proc, as `ps` would.
FAKE_BROWSER = """\
    import html, json, os, re, sys, time, urllib.parse, urllib.request
    from pathlib import Path

    folder = Path(os.environ["FAKE_BROWSER_DIR"])
    (folder / "pid").write_text(str(os.getpid()))
    while not (folder / "go").exists():
        time.sleep(0.05)
    given = urllib.request.urlopen(sys.argv[1]).read().decode()
    target = html.unescape(re.search(r'url=([^"]+)"', given).group(1))
    parts = urllib.parse.urlsplit(target)
    base = f"{parts.scheme}://{parts.netloc}"
    urllib.request.urlopen(target).read()  # the page
    code = urllib.parse.parse_qs(parts.query)["code"][0]
    ask = urllib.request.Request(base + "/api/session", json.dumps({"code": code}).encode(),
                                 {"origin": base, "content-type": "application/json"})
    session = json.loads(urllib.request.urlopen(ask).read())["session"]
    listing = urllib.request.Request(base + "/api/insights", headers={"x-mtl-session": session})
    total = json.loads(urllib.request.urlopen(listing).read())["total"]
    (folder / "done").write_text(json.dumps({"target": target, "total": total}))
"""


def fake_browser(folder: Path) -> Path:
    script = folder / "browser"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_BROWSER))
    script.chmod(0o755)
    return script


def used_against(dashboard: Dashboard, words: list[str]) -> list[int]:
    """The statuses of the API calls a process can make with `words` (everything it saw):
    a link among them opened as a browser would (then the API asked with what it set),
    and each word and each value of a link's query as a code to trade, as the session, as
    a cookie and in the query."""
    statuses = []
    for word in words:
        parts = urlsplit(word)
        values = [word, *(v for _, v in parse_qsl(parts.query))]
        base = f"http://{parts.netloc}" if parts.scheme == "http" else dashboard.base
        with httpx.Client(base_url=base, headers={"origin": base}, timeout=60) as http:
            if parts.scheme == "http":
                http.get(word, follow_redirects=True)
                statuses.append(http.get("/api/insights").status_code)
            for value in values:
                statuses += [
                    http.post("/api/session", json={"code": value}).status_code,
                    http.get("/api/insights", headers={SESSION_HEADER: value}).status_code,
                    http.get("/api/insights", headers={"cookie": f"a={value}"}).status_code,
                    http.get("/api/insights", params={"token": value, "code": value}).status_code,
                ]
    return statuses


def test_the_browser_is_opened_with_no_secret_on_its_command_line(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    """Without --no-browser, the browser ($BROWSER here, a script that does what a browser
    does) is started on a private launch file. Its command line, which every user can read
    in /proc, holds nothing that reads the memory; the file is the owner's alone; and the
    browser opens the dashboard through it, once, and the file is gone."""
    env = {**dashboard.env, "BROWSER": f"{fake_browser(tmp_path)} %s", "DISPLAY": "",
           "FAKE_BROWSER_DIR": str(tmp_path)}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "ui", "--home", str(dashboard.home)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        pid = int(
            wait_until(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text())
        )
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        assert len(argv) == 3 and argv[1] == str(tmp_path / "browser"), argv
        launch_file = Path(argv[2].removeprefix("file://"))
        words = [*argv, launch_file.name, launch_file.stem, launch_file.stem.split("-")[-1]]
        assert set(used_against(dashboard, words)) <= {401, 403}, argv
        assert argv[2].startswith("file://") and "code" not in argv[2]

        info = launch_file.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert stat.S_IMODE(launch_file.parent.stat().st_mode) == 0o700
        assert info.st_uid == os.getuid()
        if os.getuid() == 0:  # another user, for real: nobody cannot read it
            other = subprocess.run(
                ["/bin/cat", str(launch_file)],
                capture_output=True,
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
            )
            assert other.returncode != 0 and b"Permission denied" in other.stderr

        (tmp_path / "go").touch()
        done = json.loads(wait_until(lambda: (tmp_path / "done").exists() and
                                     (tmp_path / "done").read_text()))  # fmt: skip
        assert done["total"] == dashboard.cli_json("list", "--limit", "1")["total"]
        assert done["target"].startswith(f"{dashboard.base}/?code=")
        assert not launch_file.exists()  # its code is used: it went with it
        out, err = process.communicate(timeout=30)
    finally:
        (tmp_path / "go").touch()  # the fake browser ends, and lets go of the pipes
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    assert process.returncode == 0, err
    printed = out.split(": ", 1)[1].strip()
    assert printed.startswith(f"{dashboard.base}/?code=")  # the same dashboard: a new link
    assert code_of(printed) != code_of(done["target"])
    assert "a new link to the dashboard another `mtl-mcp ui` keeps open" in err
    assert set(used_against(dashboard, [code_of(done["target"])])) == {401}  # used up
    assert redeem(dashboard, printed) == dashboard.session  # the printed one still opens


def test_ui_again_on_the_open_port_gives_a_link_to_it(dashboard: Dashboard) -> None:
    """`--port` of the open dashboard: a new link to it, not a second dashboard."""
    done = dashboard.cli("ui", "--no-browser", "--port", str(dashboard.port))
    link = done.stdout.split(": ", 1)[1].strip()
    assert link.startswith(f"{dashboard.base}/?code=")
    assert redeem(dashboard, link) == dashboard.session


def test_a_taken_port_is_a_clear_error(dashboard: Dashboard) -> None:
    """--port on a port another program holds: exit 1, the project's words, no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = dashboard.cli("ui", "--no-browser", "--port", str(port), check=False)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "pick another --port" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("writable", [True, False], ids=["data-dir", "read-only-data-dir"])
def test_a_launch_file_nobody_opened_goes_when_the_dashboard_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writable: bool
) -> None:
    """The launch file of a link no browser opened (none started, say) is the owner's
    alone while the dashboard runs, and is gone once it closes, with the private folder it
    was put in where the data directory could not take it."""
    from mtl_mcp.config import load_settings
    from mtl_mcp.dashboard import run
    from mtl_mcp.server.keeper import MemoryKeeper

    settings = load_settings(tmp_path / "home")
    if not writable:  # as root, permissions do not stop a write: the run folder is a file
        settings.home.mkdir()
        (settings.home / "run").write_text("")
        monkeypatch.setattr(run.tempfile, "tempdir", str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
    with run.in_process(MemoryKeeper(settings), 0, True) as (found, _):
        assert found.browser_file is not None
        launch_file = Path(found.browser_file)
        assert stat.S_IMODE(launch_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(launch_file.parent.stat().st_mode) == 0o700
        assert f"/?code={code_of(found.url)}" not in launch_file.read_text()  # its own code
        assert "/?code=" in launch_file.read_text()
    assert not launch_file.exists()
    if not writable:
        assert list((tmp_path / "tmp").iterdir()) == []
