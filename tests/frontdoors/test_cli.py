"""The command-line front door, through click's runner and a real store."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mtl_mcp.cli import cli
from mtl_mcp.text.render import RECALL_ORDER
from tests.conftest import add_args, distinct_lessons, lesson

PLAN = "Reproduce the failing test in isolation, then fix the cause and rerun the suite."


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_add_then_recall_as_json() -> None:
    """add --json reports stored with an id; recall --json returns it with a score."""
    code, out, _ = run(
        *add_args(
            lesson(
                "Reproduce a failure before fixing it",
                "Run the failing test alone before editing code.",
            )
        ),
        "--category",
        "test-verification",
        "--json",
    )
    assert code == 0
    added = json.loads(out)
    assert added["status"] == "stored" and added["id"].startswith("ins_")
    code, out, _ = run("recall", PLAN, "--json")
    recalled = json.loads(out)
    assert code == 0 and recalled["plan"] == PLAN
    assert recalled["results"][0]["id"] == added["id"]
    assert {"title", "description", "content", "score"} <= set(recalled["results"][0])


def test_add_duplicate_reports_merged_and_rejects_secrets() -> None:
    """A second identical add is merged; a secret is rejected with exit code 1."""
    draft = lesson("Read the full error", "The last line of a traceback names the real cause.")
    first = json.loads(run(*add_args(draft), "--json")[1])
    again = json.loads(run(*add_args(draft), "--json")[1])
    assert again == {**again, "status": "merged", "id": first["id"]}
    leaky = lesson("Use the key", "Call the service with key AKIA" + "QX7ZK2M9R4T6W8Y3 in headers.")
    code, _, err = run(*add_args(leaky))
    assert code == 1 and "secret" in err


def test_import_skips_bad_lines_by_number_and_keeps_good_ones(tmp_path: Path) -> None:
    """Bad lines are reported with their line numbers; the good ones land."""
    good = distinct_lessons(3)
    lines = [
        json.dumps(good[0]),
        "{not json",
        json.dumps({"title": "only a title"}),
        "",
        json.dumps(good[1]),
        "[1, 2]",
        json.dumps(good[2]),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = run("import", str(source), "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["stored"], report["skipped"]) == (3, 3)
    assert sorted(p["line"] for p in report["problems"]) == [2, 3, 6]


def test_export_round_trips_with_import(tmp_path: Path) -> None:
    """export writes JSONL that import reads back into another home unchanged."""
    for draft in distinct_lessons(4):
        run(*add_args(draft))
    dump = tmp_path / "dump.jsonl"
    assert run("export", str(dump))[0] == 0
    other = tmp_path / "other"
    code, out, _ = run("import", str(dump), "--home", str(other), "--json")
    assert code == 0
    assert json.loads(out)["stored"] == 4
    mine = json.loads(run("list", "--json")[1])["items"]
    theirs = json.loads(run("list", "--json", "--home", str(other))[1])["items"]
    assert {i["id"] for i in mine} == {i["id"] for i in theirs}


def test_list_show_rate_forget_and_stats() -> None:
    """The browsing and editing commands work together on one insight."""
    [draft] = distinct_lessons(1)
    insight_id = json.loads(run(*add_args(draft), "--json")[1])["id"]
    assert insight_id in run("list")[1]
    code, out, _ = run("show", insight_id)
    assert code == 0 and str(draft["title"]) in out
    rated = json.loads(run("rate", insight_id, "--harmful", "--note", "wrong stack", "--json")[1])
    assert rated["harmful"] == 1 and rated["notes"] == ["wrong stack"]
    stats = json.loads(run("stats", "--json")[1])
    assert stats["total"] == 1
    code, out, _ = run("forget", insight_id, "--yes")
    assert code == 0 and "forgot" in out
    code, _, err = run("show", insight_id)
    assert code == 1 and "no insight has id" in err


def test_seed_loads_the_starter_pack_once(tmp_path: Path) -> None:
    """seed adds the starter pack; a second seed adds nothing."""
    code, out, _ = run("seed")
    assert code == 0
    added = int(out.split()[0])
    assert added >= 40
    assert run("seed")[1].startswith("0 starter insights added")
    assert json.loads(run("stats", "--json")[1])["by_project"]["starter"] == added


def test_fresh_home_recall_returns_starter_insights(monkeypatch, tmp_path: Path) -> None:
    """On a fresh data dir with the starter pack enabled, recall is useful at once."""
    monkeypatch.setenv("MTL_MCP_STARTER", "1")
    code, out, _ = run("recall", PLAN, "--json", "--home", str(tmp_path / "fresh"))
    results = json.loads(out)["results"]
    assert code == 0 and len(results) == 3
    assert all(r["project"] == "starter" for r in results)


def test_doctor_reports_each_check() -> None:
    """doctor passes on a healthy home and flags, as optional, that nothing can distil."""
    code, out, _ = run("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out)}
    assert code == 0
    assert checks["store"]["ok"] and checks["embedding model"]["ok"]
    distillation = checks["distillation"]
    assert not distillation["ok"] and not distillation["required"]
    assert "ANTHROPIC_API_KEY" in distillation["fix"] and "codex login" in distillation["fix"]
    assert "claude-not-installed-for-tests` is not on PATH" in distillation["detail"]


def test_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    """An invalid config file makes every command fail with the file and the fix."""
    home = tmp_path / "bad"
    home.mkdir()
    (home / "config.toml").write_text("dedup_threshold = 'high'\n", encoding="utf-8")
    code, _, err = run("stats", "--home", str(home))
    assert code == 1 and "config.toml" in err and "dedup_threshold" in err


def test_every_command_has_help() -> None:
    """Each command answers --help with a description."""
    for name, command in cli.commands.items():
        code, out, _ = run(name, "--help")
        assert code == 0 and command.help
        if name == "hook":  # a client runs hooks with MTL_MCP_HOME in their environment
            continue
        if name == "tune":  # a group: each of its commands takes --home
            assert isinstance(command, click.Group)
            for sub in command.commands:
                code, out, _ = run(name, sub, "--help")
                assert code == 0 and "--home" in out, sub
            continue
        assert "--home" in out, name


def test_import_reports_lint_rejections_at_their_own_line(tmp_path: Path) -> None:
    """Exported insights and drafts mixed in one batch keep their line numbers in reports."""
    draft, exported_ok = distinct_lessons(2)
    leaky = {
        **lesson(
            "Sign requests with the key",
            "Send the header ghp_" + "x7Kq2mZ9" * 4 + "xYzW with every call to the service.",
        ),
        "id": "ins_leaky",
    }
    lines = [
        json.dumps({**exported_ok, "id": "ins_exported"}),
        json.dumps(leaky),
        json.dumps(draft),
    ]
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = json.loads(run("import", str(source), "--json")[1])
    assert (report["stored"], report["rejected"]) == (2, 1)
    assert [p["line"] for p in report["problems"]] == [2]
    assert "secret" in report["problems"][0]["problem"]


def test_add_json_never_echoes_a_rejected_secret() -> None:
    """`add --json` with a token in a URL is rejected, and the token is nowhere in the output."""
    token = "ghp_" + "Zq7Lm2Xw9Pv4Kt8Rb3Nc6Hd1Fy5Gj0Sa2Ue7Wi4"
    leaky = lesson(
        "Clone over HTTPS with a token in CI",
        f"Use https://{token}@github.com/acme/api.git as the remote of the build job.",
    )
    code, out, err = run(*add_args(leaky), "--json")
    reply = json.loads(out)
    assert reply["status"] == "rejected" and reply["warnings"]
    assert token not in out + err
    code, out, err = run(*add_args(leaky))
    assert code == 1 and token not in out + err


def test_recall_says_what_its_order_is_by_when_a_later_score_is_higher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recall orders by meaning and keywords fused and shows the meaning score: where a
    later note's score is higher (0.56 then 0.58 with the starter pack), the text says what
    the order is by; the notes and the JSON results are in the same order."""
    monkeypatch.setenv("MTL_MCP_STARTER", "1")
    monkeypatch.setenv("MTL_MCP_SERVICE", "off")
    for plan, rises in (
        ("Reproduce the failing test in isolation, then fix the cause and rerun the suite.", True),
        ("Profile the slow endpoint, add caching, then measure again.", False),
    ):
        results = json.loads(run("recall", plan, "--json")[1])["results"]
        scores = [r["score"] for r in results]
        assert any(b > a for a, b in itertools.pairwise(scores)) is rises, scores
        text = run("recall", plan)[1]
        assert (RECALL_ORDER in text) is rises
        places = [text.index(r["id"]) for r in results]
        assert places == sorted(places)


def test_doctor_counts_a_local_team_pool_right_after_a_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `share`, doctor's team pool check counts the shared insight, as `stats` does
    (it said "empty" for a pool in a folder)."""
    monkeypatch.setenv("MTL_MCP_TEAM_URI", str(tmp_path / "pool"))
    monkeypatch.setenv("MTL_MCP_SERVICE", "off")
    draft = lesson("Read the full error", "The last line of a traceback names the real cause.")
    added = json.loads(run(*add_args(draft), "--json")[1])
    code, _, err = run("share", added["id"])
    assert code == 0, err
    assert json.loads(run("stats", "--json")[1])["team"]["total"] == 1
    checks = {c["name"]: c for c in json.loads(run("doctor", "--json")[1])}
    team = checks["team pool"]
    assert team["ok"] and "empty" not in team["detail"], team["detail"]
    assert "1 active insights, 1 shared by you" in team["detail"]
