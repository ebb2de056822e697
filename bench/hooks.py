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
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
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
