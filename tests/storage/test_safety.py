"""Purges that leave no trace, backups and restores, doctor on a damaged store, private files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.learning.spool import Job, Spool
from mtl_mcp.operations.context import refresh_context
from mtl_mcp.storage.backup import BACKUPS_KEPT, list_backups, make_backup
from mtl_mcp.storage.schema import META_TABLE, TABLE
from tests.conftest import add_args, distinct_lessons, lesson

# Made-up internal tokens the secret scanner does not know: exactly what slips through.
TOKEN = "zq7internal" + "tok9x2m4k8"
OTHER_TOKEN = "vv3corp" + "cred5h1j7p"


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def add(draft: dict[str, object], *extra: str) -> str:
    code, out, err = run(
        *add_args(draft),
        "--json",
        *extra,
    )
    assert code == 0, err
    return str(json.loads(out)["id"])


def files_containing(root: Path, text: str) -> list[str]:
    """Every file under `root` whose bytes contain `text`."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and text.encode() in p.read_bytes()
    )


def leak(token: str, title: str) -> dict[str, object]:
    return lesson(
        title, f"The internal credential {token} showed up in a log line and was rotated."
    )


def test_purge_leaves_no_trace_in_any_file_of_the_data_dir(
    settings: Settings, tmp_path: Path
) -> None:
    """Table, older versions, backups, spool, logs and context cache all lose the token."""
    keep = [add(d) for d in distinct_lessons(12)]
    secret = add(
        leak(TOKEN, "Rotate a credential that leaked into logs"), "--project", str(tmp_path)
    )
    # One compacted fragment holds the row among a dozen others: deleting it leaves a soft
    # delete that compaction alone would never rewrite (under 10% of the fragment).
    Memory(settings).table.open().optimize()
    for verdict in ("--helpful", "--harmful", "--helpful"):  # more versions holding the row
        assert run("rate", secret, verdict)[0] == 0
    assert run("backup")[0] == 0
    refresh_context(settings, str(tmp_path))  # caches the project's insights' text
    Spool(settings).enqueue(
        Job(session_id="s1", transcript_path="/nowhere", last_error=f"API echoed {TOKEN}")
    )
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    (settings.logs_dir / "hooks.log").write_text(f"debug: saw {TOKEN}\nunrelated line\n")
    before = files_containing(settings.home, TOKEN)
    for where in ("store/insights.lance/data", "backups/", "context/", "spool/", "logs/"):
        assert any(f.startswith(where) for f in before), (where, before)

    code, out, err = run("purge", "--pattern", r"zq7internal\w+", "--yes", "--json")

    assert code == 0, err
    report = json.loads(out)
    assert report["ids"] == [secret] and report["traces"] == []
    assert report["versions_removed"] > 0 and report["scrubbed_backups"]
    assert files_containing(settings.home, TOKEN) == []
    assert "unrelated line" in (settings.logs_dir / "hooks.log").read_text()
    assert {i["id"] for i in json.loads(run("list", "--json")[1])["items"]} == set(keep)
    assert all(b.insights == 12 for b in list_backups(settings))


def test_forget_purge_erases_one_insight_and_a_soft_forget_can_be_purged_later(
    settings: Settings,
) -> None:
    """forget --purge removes its text at once; text left by a plain forget yields to purge."""
    add(distinct_lessons(1)[0])
    first = add(leak(TOKEN, "Rotate a credential that leaked into logs"))
    second = add(leak(OTHER_TOKEN, "Revoke a key pasted into a chat"))
    code, out, _ = run("forget", first, "--purge", "--yes", "--json")
    assert code == 0 and json.loads(out)["ids"] == [first]
    assert files_containing(settings.home, TOKEN) == []

    assert run("forget", second, "--yes")[0] == 0  # a soft delete: older versions keep it
    assert files_containing(settings.home, OTHER_TOKEN)
    code, _, err = run("forget", second, "--purge", "--yes")
    assert code == 1 and "purge --pattern" in err
    code, _, _ = run("purge", "--pattern", OTHER_TOKEN, "--yes")
    assert code == 0 and files_containing(settings.home, OTHER_TOKEN) == []


def test_purge_refuses_patterns_that_match_everything_and_asks_off_a_terminal() -> None:
    """A pattern matching empty text is refused; without a terminal, --yes is required."""
    code, _, err = run("purge", "--pattern", ".*", "--yes")
    assert code == 1 and "matches empty text" in err
    code, _, err = run("purge", "--pattern", "[unclosed", "--yes")
    assert code == 1 and "not a valid regular expression" in err
    code, _, err = run("purge", "--pattern", "secret")
    assert code == 2 and "--yes" in err


def test_purge_dry_run_lists_matches_and_changes_nothing(settings: Settings) -> None:
    """--dry-run names the matching insights; every version stays."""
    secret = add(leak(TOKEN, "Rotate a credential that leaked into logs"))
    code, out, _ = run("purge", "--pattern", TOKEN[:12], "--dry-run", "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)] == [secret]
    assert files_containing(settings.home, TOKEN)


def test_migration_takes_a_backup_first(settings: Settings) -> None:
    """Opening an older store backs it up (rows and all) before adding columns."""
    import lancedb

    store = Memory(settings)
    store.record(distinct_lessons(3))
    store.close()
    db = lancedb.connect(settings.store_uri)
    db.open_table(TABLE).drop_columns(["notes"])
    db.open_table(META_TABLE).update(where="key = 'schema_version'", values={"value": "0"})
    assert list_backups(settings) == []
    Memory(settings).stats()
    [backup] = list_backups(settings)
    assert backup.reason == "migration" and backup.insights == 3
    assert backup.schema_version == "0"


def test_only_the_newest_backups_are_kept(settings: Settings) -> None:
    """Backups beyond the newest ten are deleted."""
    Memory(settings).record(distinct_lessons(1))
    made = [make_backup(settings, "manual") for _ in range(BACKUPS_KEPT + 2)]
    kept = list_backups(settings)
    assert [b.name for b in kept] == [m.name for m in reversed(made) if m][:BACKUPS_KEPT]
    assert len(list((settings.home / "backups").iterdir())) == BACKUPS_KEPT


def test_restore_replaces_a_healthy_store_after_backing_it_up(settings: Settings) -> None:
    """Restoring an older backup brings its rows back; the replaced store is backed up."""
    first = add(distinct_lessons(1)[0])
    code, out, _ = run("backup", "--json")
    name = json.loads(out)["name"]
    add(distinct_lessons(2)[1])
    code, out, _ = run("restore", name, "--yes", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["insights"] == 1 and result["saved_as"]["insights"] == 2
    assert [i["id"] for i in json.loads(run("list", "--json")[1])["items"]] == [first]
    code, _, err = run("restore", "no-such-backup", "--yes")
    assert code == 1 and "backup --list" in err


# -- a damaged data dir ----------------------------------------------------------------------


def _truncate_data_file(store: Path) -> None:
    data = next((store / "insights.lance" / "data").glob("*.lance"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])


def _delete_data_file(store: Path) -> None:
    next((store / "insights.lance" / "data").glob("*.lance")).unlink()


def _delete_versions(store: Path) -> None:
    shutil.rmtree(store / "insights.lance" / "_versions")


def _delete_manifests(store: Path) -> None:
    for manifest in (store / "insights.lance" / "_versions").glob("*.manifest"):
        manifest.unlink()


def _garbage_meta_file(store: Path) -> None:
    for data in (store / "meta.lance" / "data").glob("*.lance"):
        data.write_bytes(os.urandom(data.stat().st_size))


def _garbage_meta_values(store: Path) -> None:
    import lancedb

    meta = lancedb.connect(str(store)).open_table(META_TABLE)
    meta.update(where="key = 'schema_version'", values={"value": "x1"})


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated data file": (_truncate_data_file, "cannot be read"),
    "missing data file": (_delete_data_file, "cannot be read"),
    "missing _versions": (_delete_versions, "version manifests"),
    "missing manifests": (_delete_manifests, "version manifests"),
    "garbage meta data file": (_garbage_meta_file, "cannot be read"),
    "garbage meta values": (_garbage_meta_values, "meta table is damaged"),
}


@pytest.fixture(scope="module")
def healthy_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store of three insights with one backup, copied by each test that damages it."""
    home = tmp_path_factory.mktemp("healthy") / "home"
    settings = load_settings(home, starter=False)
    store = Memory(settings)
    store.record(distinct_lessons(3))
    store.close()
    make_backup(settings, "manual")
    yield home


@pytest.mark.parametrize("damage", DAMAGE)
def test_doctor_names_the_damage_and_the_backup_to_restore_never_a_traceback(
    damage: str, healthy_home: Path, tmp_path: Path
) -> None:
    """Each kind of damage: doctor says what and how to restore; restore then fixes it."""
    home = tmp_path / "damaged-home"
    shutil.copytree(healthy_home, home)
    harm, symptom = DAMAGE[damage]
    harm(home / "store")

    code, out, err = run("list", "--home", str(home))
    assert code == 1 and "mtl-mcp doctor" in err and "Traceback" not in err + out
    code, out, err = run("doctor", "--json", "--home", str(home))
    checks = {c["name"]: c for c in json.loads(out)}
    assert code == 1 and "Traceback" not in err
    assert not checks["store files"]["ok"] and symptom in checks["store files"]["detail"]
    [backup] = list_backups(load_settings(home))
    assert f"mtl-mcp restore {backup.path}" in checks["store files"]["fix"]

    code, out, err = run("restore", str(backup.path), "--yes", "--json", "--home", str(home))
    assert code == 0, err
    assert json.loads(out)["moved_to"]  # a damaged store is kept aside, not backed up
    assert json.loads(run("list", "--json", "--home", str(home))[1])["total"] == 3
    assert run("doctor", "--home", str(home))[0] == 0


# -- file permissions ------------------------------------------------------------------------


@pytest.mark.slow
def test_data_dir_and_every_file_in_it_are_private_even_under_a_loose_umask(
    tmp_path: Path,
) -> None:
    """Under umask 022, the CLI and the hooks still create 0700 folders and 0600 files."""
    home = tmp_path / "home"
    [draft] = distinct_lessons(1)
    exe = f"{sys.executable} -m mtl_mcp"
    script = (
        f"umask 022 && {exe} add --title '{draft['title']}' --description "
        f"'{draft['description']}' --content '{draft['content']}' && "
        f"{exe} hook refresh --project-dir {tmp_path}"
    )
    env = {**os.environ, "MTL_MCP_HOME": str(home)}
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(home.rglob("*.lance")) and any(home.rglob("*.manifest"))
    assert any((home / "context").glob("*.md")) and any((home / "logs").iterdir())
    assert loose_files(home) == []


def loose_files(home: Path) -> list[str]:
    """Everything under `home` (itself included) that is not 0700 or 0600."""
    return [
        f"{oct(stat.S_IMODE(p.stat().st_mode))} {p.relative_to(home)}"
        for p in [home, *home.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_running_server_keeps_serving_after_another_process_purges(
    settings: Settings,
) -> None:
    """Recall and record still work after the purge; both leave private files (umask 022)."""
    from mcp import StdioServerParameters
    from mcp.client import Client

    env = {"MTL_MCP_HOME": str(settings.home), "PATH": os.environ["PATH"], "MTL_MCP_STARTER": "0"}
    command = f"umask 022 && exec {sys.executable} -m mtl_mcp serve"
    server = StdioServerParameters(command="/bin/sh", args=["-c", command], env=env)
    async with Client(server) as client:
        leaked = leak(TOKEN, "Rotate a credential that leaked into logs")
        await client.call_tool("record_session", {"summary": "s", "insights": [leaked]})
        await client.call_tool("record_session", {"summary": "s", "insights": distinct_lessons(2)})
        before = await client.call_tool("recall_insights", {"plan": "rotate credentials", "k": 5})
        assert before.structured_content and len(before.structured_content["results"]) == 3
        purge = f"umask 022 && {sys.executable} -m mtl_mcp purge --pattern {TOKEN} --yes"
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                ["/bin/sh", "-c", purge], env={**os.environ, **env}, capture_output=True
            )
        )
        assert done.returncode == 0, done.stderr
        after = await client.call_tool("recall_insights", {"plan": "rotate credentials", "k": 5})
        assert not after.is_error and after.structured_content
        assert len(after.structured_content["results"]) == 2
        more = await client.call_tool(
            "record_session", {"summary": "s", "insights": distinct_lessons(3)[2:]}
        )
        assert more.structured_content and more.structured_content["stored"] == 1
    assert files_containing(settings.home, TOKEN) == []
    assert any(settings.home.rglob("backup.json")) and loose_files(settings.home) == []
