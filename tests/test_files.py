"""Owner-only files under the data directory, written from several threads at once."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from mtl_mcp.files import write_private


def test_threads_replacing_one_file_never_fail_or_mix_their_contents(tmp_path: Path) -> None:
    """Eight threads rewriting one file (as concurrent session-start context refreshes do)
    all succeed; the file is always one writer's whole payload, 0600, with no temp left."""
    target = tmp_path / "context" / "general.md"
    writers, rounds = 8, 25
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def write(n: int) -> None:
        start.wait()
        for _ in range(rounds):
            try:
                write_private(target, f"{n}" * 200_000 + "\n")
            except BaseException as exc:  # collected: the assertion below names them
                failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    text = target.read_text()
    assert len(text) == 200_001 and len(set(text.rstrip("\n"))) == 1
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["general.md"]
