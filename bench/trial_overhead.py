"""The trial harness's own overhead per session, the agent left out.

    python bench/trial_overhead.py [--tasks 8] [--out FILE]

(FILE: bench-results/trial_overhead.json by default.)

A trial of the built-in suite (`--tasks` of its tasks, arms none and memory, one run) whose
client is a stub that exits at once: a two-line sh script printing the result line Claude
Code's stream-json ends with, started through the real Claude Code adapter. Each session is
timed whole (a fresh work dir with its git commit and setup, the throwaway home, mtl-mcp
installed there for the memory arm, the client, reading its output, the hidden verifier,
removing the folder); the client's own time is taken off. The figure is the median
session's overhead, with and without the verifier (the task's own check, which a suite
writer controls); the target (issue 26) is at most 2 s. The trial's fixed costs (copying
the memory, starting its service) are recorded beside it, as is the load average, since
this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET_SECONDS = 2.0
INSTANT_CLIENT = """#!/bin/sh
[ "$1" = "--version" ] && { echo "0.0.0 (instant stub)"; exit 0; }
echo '{"type": "result", "is_error": false, "num_turns": 1,'\
' "usage": {"input_tokens": 1, "output_tokens": 1}}'
"""


def measure(tasks: int) -> dict[str, Any]:
    from mtl_mcp.config import load_settings
    from mtl_mcp.memory import Memory
    from mtl_mcp.operations.service import stop_services
    from mtl_mcp.trials.clients.claude_code import ClaudeCodeClient
    from mtl_mcp.trials.manage import plan_trial
    from mtl_mcp.trials.plan import schedule
    from mtl_mcp.trials.records import TrialFiles, remove_tree
    from mtl_mcp.trials.runner import Runner

    root = Path(tempfile.mkdtemp(prefix="mtlb-", dir="/tmp"))
    try:
        client = root / "instant-claude"
        client.write_text(INSTANT_CLIENT)
        client.chmod(0o755)
        user = load_settings(root / "home", starter=True)
        memory = Memory(user)
        memory.stats()  # the store, with the starter pack
        memory.close()
        adapter = ClaudeCodeClient(command=str(client))
        spec, suite = plan_trial(user, adapter, suite="builtin", arms=["none", "memory"],
                                 runs=1, tasks=tasks, seed=1)  # fmt: skip
        files = TrialFiles(user.home, spec.id)
        files.create(spec)
        runner = Runner(files, suite, adapter, user)
        started = time.perf_counter()
        runner.prepare()
        prepared = time.perf_counter()
        runner._warm_services(None, set())
        warmed = time.perf_counter()
        sessions = []
        for slot in schedule(runner.spec):
            task = runner.tasks[slot.task]
            store = runner.stores.store_for(slot.arm, task)
            clock = time.perf_counter()
            record = runner.session(slot, task, store)
            whole = time.perf_counter() - clock
            assert record.error is None, record.error
            sessions.append({
                "task": task.id, "arm": slot.arm, "whole_s": round(whole, 4),
                "client_s": record.seconds, "verify_s": record.verify_seconds,
                "overhead_s": round(whole - record.seconds, 4),
                "without_verifier_s": round(whole - record.seconds - record.verify_seconds, 4),
            })  # fmt: skip
        stop_services(runner.stores.home_of("memory"))
        by_arm = {
            arm: statistics.median(s["overhead_s"] for s in sessions if s["arm"] == arm)
            for arm in spec.arms
        }
        overhead = statistics.median(s["overhead_s"] for s in sessions)
        return {
            "target_s": TARGET_SECONDS,
            "sessions": len(sessions),
            "median_overhead_s": round(overhead, 3),
            "median_overhead_without_verifier_s": round(
                statistics.median(s["without_verifier_s"] for s in sessions), 3
            ),
            "max_overhead_s": round(max(s["overhead_s"] for s in sessions), 3),
            "median_overhead_by_arm_s": {arm: round(v, 3) for arm, v in by_arm.items()},
            "median_verifier_s": round(statistics.median(s["verify_s"] for s in sessions), 3),
            "fixed_prepare_arms_s": round(prepared - started, 2),
            "fixed_start_services_s": round(warmed - prepared, 2),
            "meets_target": overhead <= TARGET_SECONDS,
            "per_session": sessions,
        }
    finally:
        remove_tree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "trial_overhead.json")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    result = {"load_average_at_start": round(load, 2), **measure(args.tasks)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: v for k, v in result.items() if k != "per_session"}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
