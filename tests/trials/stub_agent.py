"""A scripted agent that is a real process, run by the trial harness as its client (see
tests.trials.stub). It finds its task by the prompt, writes the task's reference or
tempting files into its working directory, and prints its usage as one JSON line.

STUB_POLICY:  blind     passes with the task's own probability, whatever the arm
              favoured  passes more often when a memory is attached (MTL_MCP_HOME set):
                        the positive control of the false-positive test
              sleep     sleeps STUB_SLEEP seconds first (timeouts, Ctrl-C)
              fail      exits 1 with an API error (a client that cannot run)
STUB_SEED and STUB_STATE (a folder) make the noise reproducible: the n-th session of a
trial draws the n-th number of a seeded stream.
"""

import json
import os
import pathlib
import random
import shutil
import sys
import time
import tomllib

prompt = sys.argv[-1]
policy = os.environ.get("STUB_POLICY", "blind")
suite = pathlib.Path(os.environ["STUB_SUITE"])
if policy == "fail":
    print(json.dumps({"error": "API Error: 401 invalid x-api-key"}))
    sys.exit(1)
if policy == "sleep":
    time.sleep(float(os.environ.get("STUB_SLEEP", "30")))
task = next(
    t
    for t in sorted(suite.iterdir())
    if (t / "task.toml").is_file()
    and tomllib.loads((t / "task.toml").read_text())["prompt"] == prompt
)
state = pathlib.Path(os.environ["STUB_STATE"])
state.mkdir(parents=True, exist_ok=True)
counter = state / "sessions"
count = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(count + 1))
seed = int(os.environ.get("STUB_SEED", "0"))
easiness = random.Random(f"{seed}-{task.name}").uniform(0.2, 0.8)
draw = random.Random(f"{seed}-{count}").random()
if policy == "favoured":
    easiness = 0.9 if os.environ.get("MTL_MCP_HOME") else 0.15
overlay = task / ("reference" if draw < easiness else "tempting")
shutil.copytree(overlay, pathlib.Path.cwd(), dirs_exist_ok=True)
print(
    json.dumps(
        {
            "tokens_in": 1000 + 10 * len(prompt),
            "tokens_out": 200,
            "turns": 2,
            "tool_calls": 1,
            "session_id": f"stub-{count}",
        }
    )
)
