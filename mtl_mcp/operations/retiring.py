"""Services that stepped aside for a newer release and still serve the windows they had.

A retiring service has released its socket and its lock (a newer one listens there now),
so no hello reaches it any more; it exits once its last window closes. So that `service
status`, `doctor` and `service stop` still see it, whoever retires it leaves a record in
`<home>/run/retiring/<pid>.json` (its pid, version and key): the service itself when a
newer window asks it to step aside, or the newer service that retired an older release's.
A record whose process is gone is removed by the next reader.

Standard library only, like `service`: the relay and the hooks import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from mtl_mcp.files import private_dir, write_private

FOLDER = ("run", "retiring")


def _folder(home: Path) -> Path:
    return home.joinpath(*FOLDER)


def note_retiring(home: Path, pid: int, version: str, key: str | None) -> None:
    """Record that service `pid` (of `version`, listening at `key`) stepped aside. Never
    raises: the record only lets status see it."""
    folder = _folder(home)
    with contextlib.suppress(OSError):
        private_dir(folder)
        told = {"pid": pid, "version": version, "key": key or None, "since": time.time()}
        write_private(folder / f"{pid}.json", json.dumps(told))


def forget_retiring(home: Path, pid: int) -> None:
    """Remove the record of service `pid`, at its exit."""
    with contextlib.suppress(OSError):
        (_folder(home) / f"{pid}.json").unlink(missing_ok=True)


def retiring_services(home: Path) -> list[dict[str, Any]]:
    """Status answers for the retiring services of data directory `home` that still run
    (`windows` and `uptime_s` are not known: they no longer answer)."""
    folder = _folder(home)
    found = []
    for record in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            told = json.loads(record.read_text(encoding="utf-8"))
            pid = int(told["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            told, pid = {}, 0
        if pid > 0 and is_service(pid):
            found.append(
                {
                    "ok": True,
                    "retiring": True,
                    "pid": pid,
                    "version": str(told.get("version") or "?"),
                    "key": told.get("key") or None,
                    "windows": None,
                    "uptime_s": None,
                    "rss_mb": rss_mb(pid),
                }
            )
        else:
            with contextlib.suppress(OSError):
                record.unlink()
    return found


def is_service(pid: int) -> bool:
    """Whether `pid` runs an `mtl-mcp service` (not another process that reused its pid)."""
    if not alive(pid):
        return False
    if not Path("/proc").is_dir():
        return True  # no /proc (macOS): alive is all one can tell
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile
        return False
    return b"service" in argv and any(b"mtl" in arg for arg in argv)


def detached_workers(home: Path) -> list[int]:
    """The pids of the detached `mtl-mcp` processes a hook started for data directory `home`
    (`hook refresh`, `hook worker`: they outlive the session that started them); none where
    there is no /proc (macOS)."""
    if not Path("/proc").is_dir():
        return []
    wanted = [b"--home", os.fsencode(home.resolve())]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if argv[1:4] == [b"-m", b"mtl_mcp", b"hook"] and argv[-2:] == wanted:
            found.append(int(entry.name))
    return [pid for pid in found if alive(pid)]


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its parent does not)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def rss_mb(pid: int) -> float | None:
    """Process `pid`'s resident memory in MB, where /proc says."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return None
