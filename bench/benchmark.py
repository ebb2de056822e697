"""Performance figures for the README, measured in one run on this machine.

    python bench/benchmark.py [--quick] [--out bench-results/results.json]

1. Handshake: spawn -> `initialize` + `tools/list` answered, for a new mtl-mcp window with
   the shared service warm, with no service running (the window starts it), in-process
   (MTL_MCP_SERVICE=off), a bare MCPServer with one tool (bench/bare_server.py) and the
   official Node memory server; alternating runs, medians.
2. At 10,000 and 100,000 insights, through a window and the warm service: the first recall
   of a new window, warm recall over MCP stdio (client-side p50/p90, 3-sentence plans), the
   resident memory of the window (the relay) and of the service; next to in-process
   baselines: LanceDB's flat cosine search (the paper's plain brute force), a numpy
   matrix-vector product (the floor) and the query embedding alone.
3. Hook return time: `mtl-mcp hook session-end` / `session-start` as a client runs them.
4. Bulk import: `mtl-mcp import` of generated insights: throughput and peak resident memory.

`bench/stress.py` measures recall while windows write; `bench/peers.py` the peer in depth.

The large stores are filled directly through LanceDB with random unit vectors: recall cost
does not depend on what the vectors say, and embedding 100,000 texts would take an hour.
Figures are medians from one run; this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# As the CLI does for the server: a threaded BLAS fights the model's threads on 2 cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import anyio
import numpy as np
import pyarrow as pa
from mcp import StdioServerParameters
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.operations.service import statuses, stop_services
from mtl_mcp.storage.schema import insight_schema

ROOT = Path(__file__).resolve().parent.parent
# 3-4 sentence plans, as the server's instructions ask for (each sentence is embedded).
PLANS = [
    "First I will reproduce the failing test in isolation to see the real error. Then I will "
    "read the code it exercises and make the smallest fix. Finally I will rerun the test and "
    "the whole suite before claiming it is done.",
    "I will inspect the configuration loader and list the environment variables it reads. "
    "Then I will add validation with clear error messages. I will verify it with a malformed "
    "file and with the existing tests.",
    "I will profile the slow endpoint first to find the hot query. Then I will add an index or "
    "a cache where the profile points. I will measure again under the same load to confirm "
    "the gain.",
    "I will read the client library's documentation and its pagination contract. Then I will "
    "write a small script that fetches every page. Once it works I will wire it into the "
    "service and test the edge cases.",
]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def p90_ms(samples: list[float]) -> float:
    return round(float(np.percentile(samples, 90)) * 1000, 2)


def server_env(home: Path) -> dict[str, str]:
    return {"MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0", "PATH": os.environ["PATH"]}


async def handshake(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        elapsed = time.perf_counter() - start
    return elapsed


def window(home: Path, **extra: str) -> StdioServerParameters:
    """A client window's `mtl-mcp serve`, as an installer registers it."""
    command = str(Path(sys.executable).with_name("mtl-mcp"))
    return StdioServerParameters(command=command, args=["serve"], env={**server_env(home), **extra})


async def bench_handshake(runs: int, home: Path) -> dict[str, Any]:
    settings = load_settings(home, starter=False)
    Memory(settings).close()  # the store exists: every variant opens the same one
    variants: dict[str, StdioServerParameters] = {
        "bare": StdioServerParameters(
            command=sys.executable, args=[str(ROOT / "bench/bare_server.py")], env=server_env(home)
        ),
        "window_service_warm": window(home),
        "window_no_service": window(home),
        "in_process": window(home, MTL_MCP_SERVICE="off"),
    }
    node = node_memory_server(home.parent / "peer")
    if node is not None:
        variants["node_memory_server"] = node
    times: dict[str, list[float]] = {name: [] for name in variants}
    await handshake(window(home))  # the service starts, and is warm for the runs below
    for _ in range(runs):
        for name, params in variants.items():
            if name == "window_no_service":
                stop_services(settings.home)
            times[name].append(await handshake(params))
            if name == "window_no_service":
                await handshake(window(home))  # warm again for the next variant
    medians = {name: median_ms(samples) for name, samples in times.items()}
    stop_services(settings.home)
    return {
        "runs": runs,
        **{f"{name}_median_ms": value for name, value in medians.items()},
        "no_service_over_bare": round(medians["window_no_service"] / medians["bare"], 3),
        "in_process_over_bare": round(medians["in_process"] / medians["bare"], 3),
    }


def node_memory_server(where: Path) -> StdioServerParameters | None:
    """The official Node memory server, installed from npm (None without npm)."""
    from peers import install_peer

    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    entry = install_peer(where)
    return StdioServerParameters(
        command=shutil.which("node") or "node",
        args=[str(entry)],
        env={"PATH": os.environ["PATH"], "MEMORY_FILE_PATH": str(where / "memory.jsonl")},
    )


def synthetic_batches(
    size: int, dim: int = 384, seed: int = 7, name: str = "bench"
) -> Iterator[dict[str, Any]]:
    """Columns of `size` synthetic insights with random unit vectors, 20,000 at a time
    (ids `ins_<name><n>`)."""
    rng = np.random.default_rng(seed)
    now = datetime(2026, 11, 1, tzinfo=UTC)
    chunk = 20_000
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        vectors = rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"ins_{name}{start + i:011d}" for i in range(n)]
        yield {
            "id": ids,
            "title": [f"Synthetic lesson {start + i}" for i in range(n)],
            "description": ["When benchmarking recall."] * n,
            "content": ["Measure before and after every change; compare medians."] * n,
            "polarity": ["success"] * n,
            "category": ["workflow-discipline"] * n,
            "domain": [f"domain-{i % 12}" for i in range(n)],
            "languages": [[]] * n,
            "tags": [[]] * n,
            "project": [f"project-{i % 40}" for i in range(n)],
            "projects": [[f"project-{i % 40}"] for i in range(n)],
            "session_id": [None] * n,
            "client": ["bench"] * n,
            "model": [None] * n,
            "created_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "updated_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "support": [1] * n,
            "helpful": [0] * n,
            "harmful": [0] * n,
            "recall_count": [0] * n,
            "status": ["active"] * n,
            "abstraction_score": [1.0] * n,
            "notes": [[]] * n,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        }


def fill_store(home: Path, size: int) -> Memory:
    """A store of `size` synthetic insights with random unit vectors."""
    store = Memory(load_settings(home, starter=False))
    store.stats()  # creates the table and its metadata
    table = store.table.open()
    schema = insight_schema(384)
    for columns in synthetic_batches(size):
        table.add(pa.table(columns, schema=schema))
    table.optimize()
    store.close()
    return store


def baselines(store: Memory, reps: int) -> dict[str, float]:
    """In-process: LanceDB flat cosine search, numpy brute force, the query embedding, and
    our own recall without the MCP round trip."""
    table = store.table.open()
    embedder = store.embedder
    queries = [embedder.embed_query(p) for p in PLANS]
    lance, floor, embed, ours = [], [], [], []
    matrix = store.table.snapshot().vectors
    for query, plan in zip(
        itertools.islice(itertools.cycle(queries), reps), itertools.cycle(PLANS), strict=False
    ):
        start = time.perf_counter()
        table.search(query).distance_type("cosine").select(["id", "_distance"]).limit(3).to_list()
        lance.append(time.perf_counter() - start)
        start = time.perf_counter()
        scores = matrix @ query
        np.argpartition(-scores, 3)[:3]
        floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        embedder.embed_query(plan)
        embed.append(time.perf_counter() - start)
        start = time.perf_counter()
        store.recall(plan)
        ours.append(time.perf_counter() - start)
    return {
        "lancedb_flat_p50_ms": median_ms(lance),
        "numpy_floor_p50_ms": median_ms(floor),
        "query_embed_p50_ms": median_ms(embed),
        "in_process_recall_p50_ms": median_ms(ours),
    }


def rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of a process, from /proc: now (VmRSS) or its high-water mark since it
    exec'd (VmHWM; not a child's rusage, which counts the parent's pages it shared before)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def window_pid(home: Path) -> int | None:
    """The pid of the `mtl-mcp serve` window (the relay) using `home`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if cmdline.endswith(b"mtl-mcp\x00serve\x00") and str(home).encode() in environ:
            return int(proc.name)
    return None


async def bench_recall(home: Path, reps: int) -> dict[str, Any]:
    """Through a window and the service, warmed by an earlier window."""
    settings = load_settings(home, starter=False)
    async with Client(window(home)) as warmer:  # starts the service and warms it
        await warmer.call_tool("recall_insights", {"plan": PLANS[0]})
    samples: list[float] = []
    async with Client(window(home)) as client:  # a new window, service warm
        await client.list_tools()
        start = time.perf_counter()
        first = await client.call_tool("recall_insights", {"plan": PLANS[1], "k": 3})
        first_ms = round((time.perf_counter() - start) * 1000, 2)
        assert not first.is_error, first.content
        for plan in itertools.islice(itertools.cycle(PLANS), reps):
            start = time.perf_counter()
            result = await client.call_tool("recall_insights", {"plan": plan, "k": 3})
            samples.append(time.perf_counter() - start)
            assert not result.is_error, result.content
        relay = window_pid(home)
        window_rss = rss_mb(relay) if relay else None
        status = next(iter(statuses(settings)), {})  # the one service its windows share
    stop_services(settings.home)
    return {
        "first_recall_new_window_ms": first_ms,
        "recall_p50_ms": median_ms(samples),
        "recall_p90_ms": p90_ms(samples),
        "window_rss_mb": window_rss,
        "service_rss_mb": status.get("rss_mb"),
    }


def generated_insights(count: int) -> list[dict[str, Any]]:
    """Distinct, realistic-length insights (about 50 words each)."""
    subjects = [
        "database migrations",
        "flaky tests",
        "shell scripts",
        "API clients",
        "config loaders",
        "dependency upgrades",
        "log pipelines",
        "error handlers",
        "cache layers",
        "date parsing",
        "file uploads",
        "form inputs",
        "retry loops",
        "build caches",
        "feature flags",
        "auth tokens",
        "CSV imports",
        "thread pools",
        "memory profiles",
        "container images",
        "queue consumers",
        "search indexes",
        "payment webhooks",
        "schema changes",
        "CLI parsers",
    ]
    actions = [
        "inspect before editing",
        "verify after changing",
        "reproduce in isolation",
        "read the documentation for",
        "write a failing test for",
        "measure before optimizing",
        "log the inputs of",
        "validate the shape of",
        "roll back quickly on problems with",
        "review the full diff of",
    ]
    reasons = [
        "hidden state makes later failures look unrelated",
        "the first symptom is rarely the cause",
        "a quick fix there tends to break a neighbouring contract",
        "silent partial success is worse than a loud failure",
    ]
    settings = [
        "in a monorepo",
        "on a legacy service",
        "under deadline pressure",
        "in an unfamiliar codebase",
        "on a shared CI runner",
        "with many contributors",
        "in a data pipeline",
        "on an embedded target",
        "in a mobile app",
        "in a research notebook",
    ]
    combinations = list(itertools.product(subjects, actions, reasons, settings))
    if count > len(combinations):
        raise SystemExit(f"at most {len(combinations)} generated insights")
    rows = []
    for subject, action, reason, setting in combinations[:count]:
        rows.append(
            {
                "title": f"{action.capitalize()} {subject} {setting}",
                "description": f"When a task {setting} touches {subject} and may not be safe.",
                "content": (
                    f"With {subject} {setting}, {action} {subject} before moving on, because "
                    f"{reason}. Keep the evidence of what you checked so it can be trusted."
                ),
                "category": "workflow-discipline",
            }
        )
    return rows


def timed_import(
    source: Path, env: dict[str, str], report_file: Path
) -> tuple[float, float, dict[str, Any]]:
    """`mtl-mcp import SOURCE --json` in a child process with `env`: its wall time (s), peak
    RSS (MB) and report (kept in `report_file`)."""
    start = time.perf_counter()
    with report_file.open("w") as report_out:  # a file, not a pipe nobody reads while polling
        importer = subprocess.Popen(
            [sys.executable, "-m", "mtl_mcp", "import", str(source), "--json"],
            env=env,
            stdout=report_out,
            stderr=subprocess.DEVNULL,
        )
        peak = 0.0
        while importer.poll() is None:
            peak = max(peak, rss_mb(importer.pid, "VmHWM") or 0.0)
            time.sleep(0.1)
    wall = time.perf_counter() - start
    assert importer.returncode == 0, f"the import failed ({importer.returncode})"
    return wall, peak, json.loads(report_file.read_text())


def bench_import(work: Path, count: int) -> dict[str, Any]:
    """`mtl-mcp import` as a user runs it: wall clock, rate and the process's peak RSS."""
    source = work / "import.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in generated_insights(count)) + "\n")
    env = {**os.environ, **server_env(work / "import-home")}
    wall, peak, report = timed_import(source, env, work / "import-report.json")
    return {
        "insights": count,
        "stored": report.get("stored"),
        "merged": report.get("merged"),
        "cli_wall_s": round(wall, 2),
        "cli_per_s": round(count / wall, 1),
        "peak_rss_mb": peak,
    }


def bench_hooks(work: Path, runs: int) -> dict[str, Any]:
    """Return time of the hook commands as a client runs them (a fresh process each)."""
    home = work / "hooks-home"
    Memory(load_settings(home, starter=True)).close()  # a store with the starter pack
    transcript = work / "session.jsonl"
    # A user and an assistant message: the hook queues it (an empty session would be dropped).
    transcript.write_text(
        '{"type": "user", "message": {"role": "user", "content": "hi"}}\n'
        '{"type": "assistant", "message": {"role": "assistant", "content": "hello"}}\n'
    )
    times: dict[str, list[float]] = {"session-end": [], "session-start": []}
    env = {**os.environ, **server_env(home)}
    for n in range(runs):
        for event in times:
            payload = {
                "session_id": f"bench-{n}",
                "transcript_path": str(transcript),
                "cwd": str(ROOT),
                "source": "startup",
            }
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "mtl_mcp", "hook", event, "--home", str(home)],
                input=json.dumps(payload),
                text=True,
                env=env,
                check=True,
                capture_output=True,
            )
            times[event].append(time.perf_counter() - start)
        time.sleep(1.0)  # let the detached worker and refresh finish between runs
    return {f"{event}_median_ms": median_ms(samples) for event, samples in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smaller sizes, fewer runs.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "results.json")
    args = parser.parse_args()
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    runs, reps, imports = (3, 20, 1000) if args.quick else (10, 60, 10_000)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    }
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        results["handshake"] = anyio.run(bench_handshake, runs, work / "handshake")
        print(json.dumps(results["handshake"]), flush=True)
        results["hooks"] = bench_hooks(work, runs)
        print(json.dumps(results["hooks"]), flush=True)
        for size in sizes:
            home = work / f"store-{size}"
            fill_store(home, size)
            entry = {"insights": size, **anyio.run(bench_recall, home, reps)}
            entry.update(baselines(Memory(load_settings(home, starter=False)), reps))
            entry["lancedb_flat_over_ours"] = round(
                entry["lancedb_flat_p50_ms"] / entry["recall_p50_ms"], 2
            )
            results[f"recall_{size}"] = entry
            print(json.dumps(entry), flush=True)
        results["import"] = bench_import(work, imports)
        print(json.dumps(results["import"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
