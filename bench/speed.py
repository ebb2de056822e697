"""Issue 27's speed targets, each as a ratio measured in one run: this tree next to an earlier
one, whose code runs from its own checkout (in this virtualenv, through PYTHONPATH).

    git worktree add /tmp/before be0d212          # the release before these changes
    python bench/speed.py --before /tmp/before [--quick] [--only stdio,load]
                          [--out bench-results/speed.json]

Sections (the two trees' runs alternate, round by round; medians of all samples):

embedding  the plan embedding of each runtime in one process, interleaved call by call (the
           previous one: its rewrite, made by the earlier tree's converter, and its session
           options), wall and CPU time; cosine between the two runtimes' vectors over the
           shipped evaluation set; P@3 / hit@3 / MRR on its test split, for each.
stdio      warm recall over MCP stdio, through a window and the service, against the same
           recall in the worker's own process, alternating; 10k insights.
load       recall over stdio with two CPU-bound neighbour processes running, against none,
           in alternating phases; 10k insights.
cold       a new window with no service running: spawn -> the first recall answered, against
           a bare SDK server's handshake plus a warm recall; then the first recall after
           kill -9 of the service.
memory     resident memory (VmRSS) of 4 windows and the service at 10k insights, each window
           having recalled; the service alone at 100k.
writes     `mtl-mcp import` of generated insights (rate, peak RSS), and one record_session
           per call over stdio (rate).

The stores are filled with random unit vectors, as bench/benchmark.py does. This machine is
shared and noisy: read the ratios, which each compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does

import anyio
from mcp import StdioServerParameters
from mcp.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import PLANS, fill_store, generated_insights, rss_mb, timed_import

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()
SPINNER = "while True: pass"


def p50(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def env_for(tree: Path | None, home: Path) -> dict[str, str]:
    """What a window of `tree` runs with (the client passes only these)."""
    env = {"MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0", "PATH": os.environ["PATH"]}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def window(tree: Path | None, home: Path) -> StdioServerParameters:
    command = str(Path(sys.executable).with_name("mtl-mcp"))
    return StdioServerParameters(command=command, args=["serve"], env=env_for(tree, home))


def bare(tree: Path | None, home: Path) -> StdioServerParameters:
    script = str(ROOT / "bench" / "bare_server.py")
    return StdioServerParameters(command=sys.executable, args=[script], env=env_for(tree, home))


def tree_of() -> Path | None:
    value = os.environ.get("PYTHONPATH")
    return Path(value) if value else None


async def recall(client: Client, plan: str) -> float:
    start = time.perf_counter()
    result = await client.call_tool("recall_insights", {"plan": plan, "k": 3})
    elapsed = time.perf_counter() - start
    assert not result.is_error, result.content
    return elapsed


def service_pids(home: Path) -> list[int]:
    """Pids of `mtl-mcp service` processes of `home`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"service" in argv
            and b"--home" in argv
            and argv[argv.index(b"--home") + 1] == (str(home).encode())
        ):
            found.append(int(proc.name))
    return found


def window_pids(home: Path) -> list[int]:
    """Pids of the `mtl-mcp serve` windows (relays) of `home`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if cmdline.endswith(b"mtl-mcp\x00serve\x00") and f"={home}\0".encode() in environ:
            found.append(int(proc.name))
    return found


def stop(home: Path) -> None:
    for pid in service_pids(home):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 20
    while service_pids(home) and time.monotonic() < deadline:
        time.sleep(0.1)


def store(home: Path, size: int) -> Path:
    """A store of `size` synthetic insights in `home`, made by this worker's tree, once."""
    if not (home / "store").exists():
        fill_store(home, size)
    return home


# -- workers: each runs in the tree it measures -----------------------------------------------


async def stdio_worker(home: Path, reps: int) -> dict[str, Any]:
    from mtl_mcp import Memory
    from mtl_mcp.config import load_settings

    memory = Memory(load_settings(store(home, 10_000), starter=False))
    for plan in PLANS:
        memory.recall(plan)
    over, inside = [], []
    async with Client(window(tree_of(), home), read_timeout_seconds=120) as client:
        for plan in PLANS:
            await recall(client, plan)
        await anyio.sleep(2.5)  # past the store's change margin: no commit is that recent
        for n in range(reps):
            plan = PLANS[n % len(PLANS)]
            over.append(await recall(client, plan))
            start = time.perf_counter()
            memory.recall(plan, k=3)
            inside.append(time.perf_counter() - start)
    return {"stdio": over, "in_process": inside}


async def load_worker(home: Path, reps: int) -> dict[str, Any]:
    store(home, 10_000)
    idle, busy = [], []
    async with Client(window(tree_of(), home), read_timeout_seconds=120) as client:
        for plan in PLANS:
            await recall(client, plan)
        await anyio.sleep(2.5)
        for phase in range(4):
            neighbours = []
            if phase % 2:
                neighbours = [subprocess.Popen([sys.executable, "-c", SPINNER]) for _ in range(2)]
                await anyio.sleep(0.5)
            try:
                for n in range(reps):
                    (busy if neighbours else idle).append(
                        await recall(client, PLANS[n % len(PLANS)])
                    )
            finally:
                for spinner in neighbours:
                    spinner.kill()
                    spinner.wait()
    return {"idle": idle, "busy": busy}


async def cold_worker(home: Path, reps: int) -> dict[str, Any]:
    store(home, 10_000)
    tree = tree_of()
    start = time.perf_counter()
    async with Client(bare(tree, home)) as client:
        await client.list_tools()
        bare_handshake = time.perf_counter() - start
    stop(home)
    start = time.perf_counter()
    async with Client(window(tree, home), read_timeout_seconds=120) as client:
        await recall(client, PLANS[0])
        first = time.perf_counter() - start
        warm = [await recall(client, PLANS[n % len(PLANS)]) for n in range(reps)]
        [pid] = service_pids(home)
        os.kill(pid, signal.SIGKILL)
        await anyio.sleep(0.2)
        after_kill = await recall(client, PLANS[1])
    return {
        "bare_handshake": bare_handshake,
        "first_recall_no_service": first,
        "warm_recall": statistics.median(warm),
        "first_recall_after_kill": after_kill,
    }


async def memory_worker(home: Path, reps: int) -> dict[str, Any]:
    size = int(os.environ["SPEED_SIZE"])
    store(home, size)
    stop(home)
    windows = 4 if size <= 10_000 else 1
    tree = tree_of()
    async with contextlib_stack(windows, tree, home) as clients:
        for client in clients:
            for n in range(reps):
                await recall(client, PLANS[n % len(PLANS)])
        await anyio.sleep(3)  # a flush or two
        # The median of a few samples: a flush's counters start a background BM25 rebuild
        # whose transient arrays (~100 MB at 100k) one sample may or may not catch.
        samples: dict[int, list[float]] = {}
        for _ in range(RSS_SAMPLES):
            for pid in [*window_pids(home), *service_pids(home)]:
                samples.setdefault(pid, []).append(rss_mb(pid) or 0.0)
            await anyio.sleep(1)
        [service] = service_pids(home)
    stop(home)
    return {
        "windows_mb": [statistics.median(samples[pid]) for pid in samples if pid != service],
        "service_mb": statistics.median(samples[service]),
        "service_samples_mb": samples[service],
    }


RSS_SAMPLES = 7
MEMORY_ROUNDS = 5


def contextlib_stack(count: int, tree: Path | None, home: Path) -> Any:
    import contextlib

    @contextlib.asynccontextmanager
    async def clients() -> Any:
        async with contextlib.AsyncExitStack() as stack:
            opened = []
            for _ in range(count):
                client = Client(window(tree, home), read_timeout_seconds=300)
                opened.append(await stack.enter_async_context(client))
            yield opened

    return clients()


async def writes_worker(home: Path, reps: int) -> dict[str, Any]:
    count = int(os.environ["SPEED_IMPORT"])
    source = home / "import.jsonl"
    home.mkdir(parents=True, exist_ok=True)
    source.write_text("\n".join(json.dumps(r) for r in generated_insights(count)) + "\n")
    env = {**os.environ, "MTL_MCP_HOME": str(home / "import"), "MTL_MCP_STARTER": "0"}
    wall, peak, report = timed_import(source, env, home / "import-report.json")
    writes = []
    items = generated_insights(reps + 1000)[-reps:]
    async with Client(window(tree_of(), home / "calls"), read_timeout_seconds=120) as client:
        await recall(client, PLANS[0])  # the model is loaded: writes only are timed
        for item in items:
            started = time.perf_counter()
            result = await client.call_tool(
                "record_session", {"summary": "speed", "insights": [item], "project": "bench"}
            )
            writes.append(time.perf_counter() - started)
            assert not result.is_error, result.content
    stop(home / "calls")
    return {
        "import_per_s": count / wall,
        "import_peak_rss_mb": peak,
        "imported": {key: report.get(key) for key in ("stored", "merged", "rejected")},
        "writes_per_s": len(writes) / sum(writes),
    }


WORKERS: dict[str, Callable[[Path, int], Any]] = {
    "stdio": stdio_worker,
    "load": load_worker,
    "cold": cold_worker,
    "memory": memory_worker,
    "writes": writes_worker,
}


def run_worker(name: str, tree: Path | None, home: Path, reps: int, **env: str) -> dict[str, Any]:
    """One worker run, in a process whose mtl_mcp is `tree`'s (None: this one)."""
    child_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    child_env.update(env)
    if tree is not None:
        child_env["PYTHONPATH"] = str(tree)
    child_env["MTL_MCP_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, str(HERE), "--worker", name, "--home", str(home), "--reps", str(reps)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} worker failed ({tree or 'this tree'}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- sections -----------------------------------------------------------------------------


def rounds(
    name: str,
    trees: dict[str, Path | None],
    work: Path,
    count: int,
    reps: int,
    **env: str,
) -> dict[str, list[dict[str, Any]]]:
    """`count` rounds of one worker per tree, alternating; each tree keeps its own home."""
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for _ in range(count):
        for label, tree in trees.items():
            runs[label].append(run_worker(name, tree, work / f"{name}-{label}", reps, **env))
    for label in trees:
        stop(work / f"{name}-{label}")
    return runs


def joined(runs: list[dict[str, Any]], key: str) -> list[float]:
    return [value for run in runs for value in run[key]]


def stdio_section(trees: dict[str, Path | None], work: Path, quick: bool) -> dict[str, Any]:
    runs = rounds("stdio", trees, work, 2 if quick else 4, 30 if quick else 60)
    result = {}
    for label, items in runs.items():
        over, inside = joined(items, "stdio"), joined(items, "in_process")
        result[label] = {
            "stdio_p50_ms": p50(over),
            "in_process_p50_ms": p50(inside),
            "stdio_over_in_process": round(statistics.median(over) / statistics.median(inside), 3),
        }
    return result


def load_section(trees: dict[str, Path | None], work: Path, quick: bool) -> dict[str, Any]:
    # Whether the phase without neighbours is idle: other jobs on the machine would make it
    # busy too, and the ratio would say nothing. (The load average at the end includes the
    # section's own neighbours, ~2 for the last minute of it.)
    result: dict[str, Any] = {"load_average_at_start": round(os.getloadavg()[0], 2)}
    runs = rounds("load", trees, work, 1 if quick else 2, 20 if quick else 40)
    result["load_average_at_end"] = round(os.getloadavg()[0], 2)
    for label, items in runs.items():
        idle, busy = joined(items, "idle"), joined(items, "busy")
        result[label] = {
            "idle_p50_ms": p50(idle),
            "busy_p50_ms": p50(busy),
            "busy_over_idle": round(statistics.median(busy) / statistics.median(idle), 2),
        }
    if "before" in result:
        result["busy_p50_after_over_before"] = round(
            result["after"]["busy_p50_ms"] / result["before"]["busy_p50_ms"], 3
        )
    return result


def cold_section(trees: dict[str, Path | None], work: Path, quick: bool) -> dict[str, Any]:
    runs = rounds("cold", trees, work, 2 if quick else 5, 5)
    result: dict[str, Any] = {}
    for label, items in runs.items():
        figures = {
            key: p50([run[key] for run in items])
            for key in ("bare_handshake", "first_recall_no_service", "warm_recall")
        }
        figures["first_recall_after_kill"] = p50([r["first_recall_after_kill"] for r in items])
        figures["first_over_bare_plus_warm"] = round(
            figures["first_recall_no_service"]
            / (figures["bare_handshake"] + figures["warm_recall"]),
            2,
        )
        result[label] = figures
    if "before" in result:
        result["after_kill_over_cold_first_before"] = round(
            result["after"]["first_recall_after_kill"]
            / result["before"]["first_recall_no_service"],
            2,
        )
    return result


def memory_section(trees: dict[str, Path | None], work: Path, quick: bool) -> dict[str, Any]:
    """Resident memory, the median of MEMORY_ROUNDS rounds (each a fresh store and service):
    from one start to the next the heap settles 50-80 MB apart at 100k."""
    result: dict[str, Any] = {}
    count = 1 if quick else MEMORY_ROUNDS
    for size in (10_000, 100_000):
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
        for n in range(count):
            for label, items in rounds(
                f"memory-{size}-{n}", trees, work, 1, 3, SPEED_SIZE=str(size)
            ).items():
                runs[label] += items
        for label, items in runs.items():
            entry = result.setdefault(label, {})
            services = [run["service_mb"] for run in items]
            if size == 10_000:
                totals = [round(sum(run["windows_mb"]) + run["service_mb"]) for run in items]
                entry["windows_mb"] = items[0]["windows_mb"]
                entry["service_10k_mb"] = statistics.median(services)
                entry["total_4_windows_10k_mb"] = statistics.median(totals)
                entry["total_4_windows_10k_rounds_mb"] = totals
            else:
                entry["service_100k_mb"] = statistics.median(services)
                entry["service_100k_rounds_mb"] = services
    return result


def writes_section(trees: dict[str, Path | None], work: Path, quick: bool) -> dict[str, Any]:
    count = "2000" if quick else "10000"
    runs = rounds("writes", trees, work, 1, 40 if quick else 100, SPEED_IMPORT=count)
    result: dict[str, Any] = {label: items[0] for label, items in runs.items()}
    if "before" in result:
        result["import_after_over_before"] = round(
            result["after"]["import_per_s"] / result["before"]["import_per_s"], 2
        )
        result["writes_after_over_before"] = round(
            result["after"]["writes_per_s"] / result["before"]["writes_per_s"], 2
        )
    return result


SECTIONS: dict[str, Callable[[dict[str, Path | None], Path, bool], dict[str, Any]]] = {
    "stdio": stdio_section,
    "load": load_section,
    "cold": cold_section,
    "memory": memory_section,
    "writes": writes_section,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="A checkout of the earlier tree.")
    parser.add_argument("--quick", action="store_true", help="Fewer rounds and smaller sizes.")
    parser.add_argument("--only", default="embedding," + ",".join(SECTIONS))
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "speed.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker = WORKERS[args.worker.split("-")[0]]
        print(json.dumps(anyio.run(worker, args.home, args.reps)))
        return
    trees: dict[str, Path | None] = {"after": None}
    if args.before:
        trees = {"before": args.before.resolve(), "after": None}
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results["machine"] = {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="mtl-speed-") as scratch:
        for name in args.only.split(","):
            if name == "embedding":
                from embedding import embedding_section

                results[name] = embedding_section(args.before, Path(scratch), args.quick)
            else:
                results[name] = SECTIONS[name](trees, Path(scratch), args.quick)
            print(name, json.dumps(results[name]), flush=True)
            args.out.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(Path(scratch), ignore_errors=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
