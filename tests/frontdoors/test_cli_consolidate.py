"""`mtl-mcp consolidate`: the JSON scripts read, the dry run, the list and the undo, and
clear errors for wrong arguments; through click's runner and a real store."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mtl_mcp.cli import cli
from tests.memory.test_consolidation import NEW_FLAG, OLD_FLAG, SCOPED, WORDINGS


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def add(draft: dict[str, str]) -> str:
    code, out, err = run(
        "add",
        *("--title", draft["title"], "--description", draft["description"]),
        *("--content", draft["content"], "--json"),
    )
    assert code == 0, err
    return str(json.loads(out)["id"])


def test_json_dry_run_list_and_undo() -> None:
    ids = [add(d) for d in WORDINGS] + [add(d) for d in SCOPED]

    listed_before = json.loads(run("list", "--json", "--limit", "10")[1])
    code, out, _ = run("consolidate", "--dry-run", "--json")
    preview = json.loads(out)
    assert code == 0 and preview["dry_run"] is True and preview["merged"]
    assert json.loads(run("consolidate", "--list", "--json")[1]) == []
    assert json.loads(run("list", "--json", "--limit", "10")[1]) == listed_before

    code, out, _ = run("consolidate", "--json")
    done = json.loads(out)
    assert code == 0
    assert {"run", "merged", "superseded", "retired", "conflicts"} <= set(done)
    [[kept, members]] = done["merged"]
    assert sorted([kept, *members]) == sorted(ids[:3])
    assert done["superseded"] == [] and done["retired"] == []
    assert [sorted(pair) for pair in done["conflicts"]] == [sorted(ids[3:])]
    assert done["merged"] == preview["merged"] and done["conflicts"] == preview["conflicts"]

    code, out, _ = run("consolidate", "--list")
    assert code == 0 and done["run"] in out and "merged 2 wordings into 1" in out

    code, out, err = run("consolidate", "--undo", done["run"])
    assert code == 0 and f"undid {done['run']}" in out
    listed = json.loads(run("list", "--json", "--limit", "10")[1])
    assert listed["total"] == 5
    code, _, err = run("consolidate", "--undo", done["run"])
    assert code == 1 and "undone already" in err


def test_json_names_the_superseded_and_the_retired() -> None:
    """`superseded` as [[old, new]] and `retired` as [ids], as scripts read them: a changed
    flag, and a wording of a lesson its ratings retired."""
    old, new = add(OLD_FLAG), add(NEW_FLAG)
    wrong = add(WORDINGS[0])
    while json.loads(run("show", wrong, "--json")[1])["status"] == "active":
        assert run("rate", wrong, "--harmful")[0] == 0
    again = add(WORDINGS[1])

    code, out, _ = run("consolidate", "--json")

    done = json.loads(out)
    assert code == 0
    assert done["superseded"] == [[old, new]] and done["retired"] == [again]
    assert done["merged"] == [] and done["conflicts"] == []
    kinds = {change["kind"]: change for change in done["changes"]}
    assert set(kinds) == {"superseded", "retired"}
    assert f"a wording of {wrong}" in kinds["retired"]["why"]
    assert json.loads(run("show", again, "--json")[1])["status"] == "retired"


def test_a_run_for_people_says_why_and_how_to_undo() -> None:
    for draft in WORDINGS:
        add(draft)
    code, out, err = run("consolidate")
    assert code == 0
    assert "merged 2 wordings into 1 insight," in out
    assert "wordings of one lesson" in out  # the reason, under each change
    assert "undo it with: mtl-mcp consolidate --undo run-" in err
    code, out, err = run("consolidate")
    assert code == 0 and "nothing to consolidate" in err


def test_wrong_arguments_get_clear_errors() -> None:
    code, _, err = run("consolidate", "--dry-run", "--list")
    assert code == 2 and "one of --dry-run, --undo RUN and --list" in err
    code, _, err = run("consolidate", "--undo", "../../etc/passwd")
    assert code == 1 and "is not a consolidation run id" in err and "Traceback" not in err
    code, _, err = run("consolidate", "--undo", "run-20250101-000000-ab12")
    assert code == 1 and "no consolidation run" in err
    code, _, err = run("consolidate", "--team")
    assert code == 1 and "MTL_MCP_TEAM_URI" in err
