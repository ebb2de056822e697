"""What the plan-triggered recall costs a user: the tool-use hook's time, and the ledger's.

    python bench/hooks.py            # writes bench-results/hooks.json

- bare: `python -c pass`, the floor any hook process pays;
- nothing to do: `mtl-mcp hook tool-use` for a tool call of a task already served (what
  runs after almost every tool call);
- recall, warm: the tool call that triggers a recall, the shared service warm (each run a
  new session, so each one recalls);
- cold: the same with no service running (the hook starts one and returns);
- ledger: `Memory.recall` in-process with and without an origin (a recall that is recorded),
  alternated.

Medians of alternated runs; the machine is noisy, so compare within one run.

    python bench/hooks.py --before /tmp/base   # ... and bench-results/hooks_before_after.json

`--before TREE` times an older checkout (`git worktree add /tmp/base COMMIT`) against this
one in the same sitting: each with its own data directory of the same 200 lessons and its
own warm service, its code on PYTHONPATH, the two called in turn (the order swapped every
round) so that both see the same load; ratios, not milliseconds, are the result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mtl_mcp import Memory, load_settings  # noqa: E402
from mtl_mcp.operations.service import request, stop_services  # noqa: E402
from mtl_mcp.schemas import RecallOrigin  # noqa: E402
from tests.conftest import distinct_lessons  # noqa: E402

MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))
PLAN = (
    "First I will reproduce the flaky tests in a minimal case. Then I will isolate the cause, "
    "fix it and rerun the suite to verify."
)


def payload(folder: Path, session: str, prompt: str = "p1") -> str:
    transcript = folder / f"{session}.jsonl"
    lines = [
        {"type": "user", "uuid": prompt, "message": {"content": "Fix the flaky tests."}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": PLAN}]}},
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        },
    ]
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(folder),
            "prompt_id": prompt,
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": {},
            "tool_use_id": "t1",
        }
    )


def timed(argv: list[str], stdin: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60)
    return (time.perf_counter() - started) * 1000, done.stdout


def median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def seeded_side(folder: Path, name: str, tree: Path) -> tuple[dict[str, str], str]:
    """A data directory of 200 lessons written by `tree`'s own code, its service warm, and
    a payload of a task it has served already: the environment that runs `tree`'s hook."""
    home = folder / name
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MTL_MCP_HOME=str(home), MTL_MCP_STARTER="0", PYTHONPATH=str(tree))
    # Templated lessons: let their notes through (0.3's floor passes them as it is).
    env["MTL_MCP_AUTO_RECALL_MIN_P"] = "0"
    seed = (
        "from mtl_mcp import Memory, load_settings; from tests.conftest import distinct_lessons;"
        " m = Memory(load_settings(starter=False)); m.record(distinct_lessons(200)); m.close()"
    )
    subprocess.run([sys.executable, "-c", seed], env=env, cwd=tree, check=True)
    subprocess.run([MTL_MCP, "serve"], stdin=subprocess.DEVNULL, env=env, cwd=folder, check=True)
    subprocess.run(
        [MTL_MCP, "recall", "warm up"], env=env, cwd=folder, check=True, capture_output=True
    )
    served = payload(folder, f"served-{name}")
    _, said = timed([MTL_MCP, "hook", "tool-use"], served, env)
    assert "additionalContext" in said, (name, said)
    return env, served


def before_after(before: Path, rounds: int = 40) -> dict[str, Any]:
    """The hook's two costs, an older tree's and this one's, called in turn in one sitting,
    with this tree a second time (`control`, its own data directory and service) to show
    how far two identical sides drift apart on this machine: the noise band of the ratio."""
    trees = {"before": before.resolve(), "after": ROOT, "control": ROOT}
    times: dict[str, list[float]] = {
        f"{side}_{what}": [] for side in trees for what in ("idle", "recall")
    }
    times["bare"] = []
    orders = list(itertools.permutations(trees))  # each side first, middle and last alike
    with tempfile.TemporaryDirectory(prefix="mtl-bench-hooks-ab-") as scratch:
        folder = Path(scratch)
        sides = {side: seeded_side(folder, side, tree) for side, tree in trees.items()}
        try:
            for n in range(rounds):
                times["bare"].append(
                    timed([sys.executable, "-c", "pass"], "", os.environ.copy())[0]
                )
                for side in orders[n % len(orders)]:
                    env, served = sides[side]
                    times[f"{side}_idle"].append(
                        timed([MTL_MCP, "hook", "tool-use"], served, env)[0]
                    )
                    new = payload(folder, f"{side}-{n}")
                    took, said = timed([MTL_MCP, "hook", "tool-use"], new, env)
                    assert "additionalContext" in said, (side, said)
                    times[f"{side}_recall"].append(took)
        finally:
            for side in trees:
                stop_services(folder / side)
    found: dict[str, Any] = {"rounds": rounds, "bare_python_ms": median(times["bare"])}
    for side, tree in trees.items():
        idle, recall = median(times[f"{side}_idle"]), median(times[f"{side}_recall"])
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
        ).stdout.strip()
        found[side] = {
            "commit": commit,
            "nothing_to_do_ms": idle,
            "recall_warm_ms": recall,
            "recall_warm_added_ms": round(recall - idle, 1),
        }
    found["after_over_before"] = _ratios(found, times, "after", "before")
    found["control_over_after"] = _ratios(found, times, "control", "after")
    return found


def _ratios(
    found: dict[str, Any], times: dict[str, list[float]], side: str, other: str
) -> dict[str, float]:
    def paired(what: str) -> float:
        pairs = zip(times[f"{side}_{what}"], times[f"{other}_{what}"], strict=True)
        return round(statistics.median(a / b for a, b in pairs), 3)

    return {
        name: round(found[side][key] / found[other][key], 3)
        for name, key in (
            ("nothing_to_do", "nothing_to_do_ms"),
            ("recall_warm_added", "recall_warm_added_ms"),
        )
    } | {
        "nothing_to_do_median_of_pairs": paired("idle"),
        "recall_call_median_of_pairs": paired("recall"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="An older checkout to time against this one.")
    parser.add_argument("--rounds", type=int, default=40, help="Rounds of --before (default 40).")
    args = parser.parse_args()
    if args.before:
        found = before_after(args.before, args.rounds)
        (ROOT / "bench-results" / "hooks_before_after.json").write_text(
            json.dumps(found, indent=2) + "\n"
        )
        print(json.dumps(found, indent=2))
        return
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="mtl-bench-hooks-") as scratch:
        folder = Path(scratch)
        home = folder / "home"
        env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0"}
        # Templated lessons the relevance gate rightly finds no better than each other: let
        # every note through, so the recalling call is timed with notes to print, as before.
        env["MTL_MCP_AUTO_RECALL_MIN_P"] = "0"
        settings = load_settings(home, starter=False)
        memory = Memory(settings)
        memory.record(distinct_lessons(200))
        memory.close()
        subprocess.run([MTL_MCP, "serve"], stdin=subprocess.DEVNULL, env=env, check=True)
        assert request(settings, "call", method="recall", params={"plan": "warm"}, timeout=120)
        served = payload(folder, "served")
        _, out = timed([MTL_MCP, "hook", "tool-use"], served, env)  # the task is now served
        assert "additionalContext" in out, out
        bare, idle, recall = [], [], []
        for n in range(30):
            bare.append(timed([sys.executable, "-c", "pass"], "", env)[0])
            idle.append(timed([MTL_MCP, "hook", "tool-use"], served, env)[0])
            took, out = timed([MTL_MCP, "hook", "tool-use"], payload(folder, f"s{n}"), env)
            assert "additionalContext" in out, out
            recall.append(took)
        results["bare_python_ms"] = median(bare)
        results["nothing_to_do_ms"] = median(idle)
        results["recall_warm_ms"] = median(recall)
        results["recall_warm_added_ms"] = round(median(recall) - median(idle), 1)
        stop_services(home)
        cold = [
            timed([MTL_MCP, "hook", "tool-use"], payload(folder, f"c{n}"), env)[0] for n in range(3)
        ]
        results["cold_ms"] = [round(c, 1) for c in cold]
        stop_services(home)
        memory = Memory(settings)
        memory.recall("warm up")
        origin = RecallOrigin(session_id="bench", client="bench", trigger="tool")
        plain, noted = [], []
        for _ in range(200):
            started = time.perf_counter()
            memory.recall(PLAN)
            plain.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            memory.recall(PLAN, origin=origin)
            noted.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        memory.flush()
        results["ledger_flush_200_recalls_ms"] = round((time.perf_counter() - started) * 1000, 1)
        memory.close()
        results["recall_in_process_ms"] = median(plain)
        results["recall_in_process_recorded_ms"] = median(noted)
    out_file = ROOT / "bench-results" / "hooks.json"
    out_file.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
