"""A store on s3:// (MTL_MCP_STORE_URI) through every command that reads or writes it, and
through the MCP tools; the endpoint and credentials come from the config file's [storage]."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from mcp.client import Client

from mtl_mcp.cli import cli
from mtl_mcp.config import load_settings
from mtl_mcp.server.app import build_server
from tests.conftest import add_args, distinct_lessons, lesson
from tests.team.conftest import KEY_ID, REGION, SECRET, Bucket

TOKEN = "zq7store" + "tok9x2m4k8"  # an internal token no secret pattern knows
PLAN = (
    "The flaky tests fail at random. I will isolate them in a minimal reproduction, then "
    "verify after changing."
)


def configure(home: Path, bucket: Bucket, endpoint: str | None = None) -> None:
    """config.toml with both stores on the bucket; nothing in the environment."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'store_uri = "{bucket.uri("store")}"\n'
        f'team_uri = "{bucket.uri("team")}"\n'
        "[storage]\n"
        f'aws_endpoint = "{endpoint or bucket.endpoint}"\n'
        "aws_allow_http = true\n"
        f'aws_access_key_id = "{KEY_ID}"\n'
        f'aws_secret_access_key = "{SECRET}"\n'
        f'aws_region = "{REGION}"\n',
        encoding="utf-8",
    )


@pytest.fixture
def home(bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    configure(home, bucket)
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)  # the [storage] table alone must do
    return home


class Cli:
    """Runs commands in-process and keeps every output, to check none shows the secret."""

    def __init__(self) -> None:
        self.outputs: list[str] = []

    def __call__(self, *args: str, code: int = 0) -> Result:
        result = CliRunner().invoke(cli, list(args))
        self.outputs += [result.stdout, result.stderr]
        assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


def test_every_command_that_touches_the_store_works_on_s3(
    home: Path, bucket: Bucket, tmp_path: Path
) -> None:
    """add, import, list, show, recall, rate, stats, export, seed, backup, restore,
    reindex, share, forget, purge, doctor and map on s3:// stores; the bucket holds the
    tables, and no output ever shows the secret key from [storage].

    (serve runs on s3:// in test_team_machines.py; the other commands never open a store.)
    """
    run = Cli()
    first = run.json(
        *add_args(
            lesson("Retry a flaky test once", "Retry a flaky test once, then find its cause.")
        )
    )
    lessons = tmp_path / "in.jsonl"
    lessons.write_text("\n".join(json.dumps(d) for d in distinct_lessons(3, offset=40)) + "\n")
    assert "3 stored" in run("import", str(lessons)).stdout
    assert run.json("list")["total"] == 4
    assert "Retry a flaky test once" in run("show", first["id"]).stdout
    hits = run.json("recall", PLAN, "-k", "2")["results"]
    assert len(hits) == 2 and {h["source"] for h in hits} == {"personal"}
    assert "1 helpful" in run("rate", first["id"], "--helpful").stdout
    stats = run.json("stats")
    assert stats["total"] == 4 and stats["store_uri"] == bucket.uri("store")
    assert any(k.startswith("store/insights.lance/") for k in bucket.object_keys())
    exported = tmp_path / "out.jsonl"
    run("export", str(exported))
    assert len(exported.read_text().splitlines()) == 4
    made = run.json("backup")
    assert made["insights"] == 4 and any(
        b["name"] == made["name"] for b in run.json("backup", "--list")
    )
    assert "re-embedded 4" in run("reindex").stdout
    run("forget", first["id"], "--yes")
    assert run.json("restore", made["name"], "--yes")["insights"] == 4
    assert run.json("show", first["id"])["helpful"] == 1  # restored from the backup
    screened = run.json("share", first["id"], "--dry-run")
    assert [r["status"] for r in screened] == ["would-share"]
    assert [r["status"] for r in run.json("share", first["id"])] == ["shared"]
    assert run.json("stats")["team"]["total"] == 1
    leaked = run.json(
        *add_args(lesson("Rotate leaked tokens", f"The token {TOKEN} leaked in a log line once."))
    )
    run("share", leaked["id"])
    assert bucket.holding(TOKEN, "store/") and bucket.holding(TOKEN, "team/")
    report = run.json("purge", "--pattern", TOKEN, "--yes")
    assert report["ids"] == [leaked["id"]] and report["team_ids"] == [leaked["id"]]
    assert report["traces"] == [] and bucket.holding(TOKEN) == []
    report = run.json("forget", first["id"], "--purge", "--yes")
    assert report["team_ids"] == [first["id"]] and report["traces"] == []
    assert "58 starter insights added" in run("seed").stdout
    checks = {c["name"]: c for c in run.json("doctor")}
    for name in ("store files", "store", "team pool"):
        assert checks[name]["ok"], checks[name]
    run("map", "--out", str(tmp_path / "map.html"))
    assert (tmp_path / "map.html").stat().st_size > 1000
    assert not any(SECRET in output for output in run.outputs)


def test_an_unreachable_store_fails_with_advice_and_never_shows_the_secret(
    home: Path, bucket: Bucket
) -> None:
    """A wrong endpoint: one `Error:` line saying what to check, without the credentials."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    configure(home, bucket, endpoint=closed)
    run = Cli()
    result = run("stats", code=1)
    assert "Error:" in result.stderr and "[storage]" in result.stderr
    assert SECRET not in result.stderr + result.stdout
    settings = load_settings(home)
    assert SECRET not in repr(settings) and settings.storage["aws_secret_access_key"] == SECRET


@pytest.mark.anyio
async def test_the_mcp_tools_work_on_an_s3_store(home: Path) -> None:
    """record_session, recall_insights, list_memories, rate_insight, forget_insight and the
    resources, over the MCP client SDK, with the store on s3://."""
    server = build_server(load_settings(home))
    async with Client(server, raise_exceptions=True) as client:

        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return result.structured_content

        recorded = await call(
            "record_session",
            summary="Fixed flaky tests.",
            outcome="success",
            insights=distinct_lessons(2, offset=40),
            project="github.com/acme/api",
        )
        assert recorded["stored"] == 2
        recalled = await call("recall_insights", plan=PLAN, k=2)
        assert [r["source"] for r in recalled["results"]] == ["personal"] * 2
        assert "notice" not in recalled  # the team pool answered: nothing to say
        first = recalled["results"][0]["id"]
        page = await call("list_memories", limit=5)
        assert page["total"] == 2
        assert (await call("rate_insight", id=first, helpful=True))["helpful"] == 1
        stats = json.loads((await client.read_resource("insights://stats")).contents[0].text)  # type: ignore[union-attr]
        assert stats["total"] == 2 and stats["team"]["outbox"] == 0
        assert (await call("forget_insight", id=first))["forgotten"] is True
        assert (await call("list_memories"))["total"] == 1
