"""A cold setup of a trial suite: every task's work dir made from nothing.

    python bench/trial_setup.py [--suite builtin|DIR] [--runs 5] [--out FILE]

(FILE: bench-results/trial_setup.json by default.)

Each run is a fresh interpreter (so the import of mtl_mcp.trials.suite is paid, as by
`mtl-mcp trial run`) that loads the suite, then for every task copies repo/ into a new temp
dir, makes it a git repo with one commit and runs the task's setup: what a trial does before
its first session. The target (issue 26) is at most 30 s for the whole built-in suite.
The figure is the median of the runs; the load average at the start is recorded beside it,
since this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 30.0

# One cold run: imports included, every task prepared in turn, timings as JSON on stdout.
ONE_RUN = """
import json, sys, tempfile, time
from pathlib import Path
started = time.perf_counter()
from mtl_mcp.trials.suite import load_suite, prepare_workdir
suite = load_suite(sys.argv[1])
loaded = time.perf_counter()
per_task = {}
with tempfile.TemporaryDirectory(prefix="mtl-bench-setup-") as scratch:
    for task in suite.tasks:
        t = time.perf_counter()
        prepare_workdir(task, Path(scratch) / task.id)
        per_task[task.id] = time.perf_counter() - t
    done = time.perf_counter()
print(json.dumps({"load_s": loaded - started, "total_s": done - started, "per_task_s": per_task}))
"""


def one_run(suite: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, suite],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="builtin")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "trial_setup.json")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    runs = [one_run(args.suite) for _ in range(args.runs)]
    totals = [run["total_s"] for run in runs]
    per_task: dict[str, list[float]] = {}
    for run in runs:
        for task_id, seconds in run["per_task_s"].items():
            per_task.setdefault(task_id, []).append(seconds)
    medians = {task_id: statistics.median(values) for task_id, values in per_task.items()}
    slowest = max(medians, key=medians.__getitem__)
    median_total = statistics.median(totals)
    result = {
        "suite": args.suite,
        "tasks": len(per_task),
        "runs": args.runs,
        "cold_setup_s_median": round(median_total, 3),
        "cold_setup_s_runs": [round(t, 3) for t in totals],
        "import_and_load_s_median": round(statistics.median(run["load_s"] for run in runs), 3),
        "per_task_ms_median": round(statistics.median(medians.values()) * 1000, 1),
        "slowest_task": {"id": slowest, "ms_median": round(medians[slowest] * 1000, 1)},
        "target_s": TARGET_SECONDS,
        "fraction_of_target": round(median_total / TARGET_SECONDS, 3),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": round(load_before, 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
