"""Performance figures for the README, measured in one run on this machine.

    python bench/benchmark.py [--quick] [--out bench-results/results.json]

1. Handshake: spawn -> `initialize` + `tools/list` answered, mtl-mcp vs a bare MCPServer
   with one tool (bench/bare_server.py), alternating runs; medians and their ratio.
2. Warm recall over MCP stdio at 10,000 and 100,000 insights (client-side p50/p90), next to
   in-process baselines: LanceDB's flat cosine search (the paper's plain brute force), a
   numpy matrix-vector product (the floor) and the query embedding alone.
3. Server RSS at the largest size.
4. Hook return time: `mtl-mcp hook session-end` / `session-start` as a client runs them.
5. Bulk import throughput: `mtl-mcp import` of generated insights (wall clock, and the
   in-process rate without interpreter start-up).

The large stores are filled directly through LanceDB with random unit vectors: recall cost
does not depend on what the vectors say, and embedding 100,000 texts would take an hour.
Figures are medians from one run; this machine is shared and noisy.
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


async def bench_handshake(runs: int, home: Path) -> dict[str, Any]:
    bare = StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "bench/bare_server.py")], env=server_env(home)
    )
    ours = StdioServerParameters(
        command=sys.executable, args=["-m", "mtl_mcp", "serve"], env=server_env(home)
    )
    times: dict[str, list[float]] = {"bare": [], "mtl": []}
    for _ in range(runs):
        times["bare"].append(await handshake(bare))
        times["mtl"].append(await handshake(ours))
    bare_ms, mtl_ms = median_ms(times["bare"]), median_ms(times["mtl"])
    return {
        "runs": runs,
        "bare_median_ms": bare_ms,
        "mtl_median_ms": mtl_ms,
        "ratio": round(mtl_ms / bare_ms, 3),
    }


def fill_store(home: Path, size: int) -> Memory:
    """A store of `size` synthetic insights with random unit vectors."""
    store = Memory(load_settings(home, starter=False))
    store.stats()  # creates the table and its metadata
    table = store.table.open()
    rng = np.random.default_rng(7)
    schema = insight_schema(384)
    now = datetime(2026, 11, 1, tzinfo=UTC)
    chunk = 20_000
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        vectors = rng.standard_normal((n, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"ins_bench{start + i:011d}" for i in range(n)]
        columns: dict[str, Any] = {
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
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
        }
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


def rss_mb(home: Path) -> float | None:
    """Resident memory of the `mtl_mcp serve` process using `home`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"mtl_mcp\x00serve" in cmdline and str(home).encode() in environ:
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    return None


async def bench_recall(home: Path, reps: int) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mtl_mcp", "serve"], env=server_env(home)
    )
    samples: list[float] = []
    async with Client(params) as client:
        await client.list_tools()
        await client.call_tool("recall_insights", {"plan": PLANS[0]})  # waits for warm-up
        for plan in itertools.islice(itertools.cycle(PLANS), reps):
            start = time.perf_counter()
            result = await client.call_tool("recall_insights", {"plan": plan, "k": 3})
            samples.append(time.perf_counter() - start)
            assert not result.is_error, result.content
        rss = rss_mb(home)
    return {
        "recall_p50_ms": median_ms(samples),
        "recall_p90_ms": p90_ms(samples),
        "server_rss_mb": rss,
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
    rows = []
    for subject, action, reason in itertools.islice(
        itertools.product(subjects, actions, reasons), count
    ):
        rows.append(
            {
                "title": f"{action.capitalize()} {subject}",
                "description": f"When a task touches {subject} and the change may not be safe.",
                "content": (
                    f"With {subject}, {action} {subject} before moving on, because {reason}. "
                    f"Keep the evidence of what you checked so the result can be trusted."
                ),
                "category": "workflow-discipline",
            }
        )
    return rows


def bench_import(work: Path, count: int) -> dict[str, Any]:
    source = work / "import.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in generated_insights(count)) + "\n")
    home = work / "import-home"
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mtl_mcp", "import", str(source), "--json"],
        env={**os.environ, **server_env(home)},
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - start
    store = Memory(load_settings(work / "import-home-2", starter=False))
    from mtl_mcp.schemas import InsightDraft

    drafts = [InsightDraft.model_validate(r) for r in generated_insights(count)]
    store.embedder.embed_query("load the model first")
    start = time.perf_counter()
    for offset in range(0, count, 256):
        store.import_insights(drafts[offset : offset + 256])
    in_process = time.perf_counter() - start
    return {
        "insights": count,
        "cli_wall_s": round(wall, 2),
        "cli_per_s": round(count / wall, 1),
        "in_process_per_s": round(count / in_process, 1),
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
    runs, reps, imports = (3, 20, 200) if args.quick else (10, 60, 1000)
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
            store = fill_store(home, size)
            entry = {
                "insights": size,
                **anyio.run(bench_recall, home, reps),
                **baselines(Memory(load_settings(home, starter=False)), reps),
            }
            entry["lancedb_flat_over_ours"] = round(
                entry["lancedb_flat_p50_ms"] / entry["recall_p50_ms"], 2
            )
            results[f"recall_{size}"] = entry
            print(json.dumps(entry), flush=True)
            del store
        results["import"] = bench_import(work, imports)
        print(json.dumps(results["import"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
