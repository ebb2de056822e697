"""The team pool on an S3 API server, measured in one run on this machine.

    python bench/team.py [--quick] [--out bench-results/team.json]

moto's S3 server runs as its own process on 127.0.0.1 (a single Python process: it is the
bottleneck, so read these as figures for comparing, not as AWS or MinIO predictions).

1. Snapshot load: a process's first load of a 10,000 and a 100,000 insight pool (rows and
   vectors over S3, medians of 3 fresh loads), and the keyword index built after it.
2. Recall p50, in process, with a 3-sentence plan: a personal store of 10,000 alone, and the
   same with a 10,000 insight team pool (interleaved).
3. Recall while the pool is down: with a snapshot loaded (the server case), and a fresh
   process's first recall (the CLI case), against a refused port and a silent one.
4. Write throughput: 4 processes ("machines", own homes) each sharing 50 real insights into
   one pool at once, 10 per share call and one per call.
5. Bytes stored per insight: the pools of (1) and the shared insights of (4), every object
   under the pool's prefix (versions and transactions included) over its rows.

Pools are filled directly through LanceDB with random unit vectors (recall cost does not
depend on what they say); section 4 shares real, distinct lessons.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI and server set it
os.environ.setdefault("LANCEDB_LOG", "error")

import pyarrow as pa

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.memory.team import FIRST_LOAD_WAIT
from mtl_mcp.storage.schema import SHARED_BY, insight_schema

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import PLANS, fill_store, median_ms, synthetic_batches
from stress import distinct_lessons

BUCKET = "bench"
MACHINES, EACH = 4, 50


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3:
    """moto's S3 server in its own process; the AWS_* variables point at it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        os.environ.update(
            {
                "AWS_ENDPOINT": self.endpoint,
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_REGION": "us-east-1",
            }
        )

    def start(self) -> None:
        server = Path(sys.executable).with_name("moto_server")
        self.process = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint)

    def bytes_under(self, prefix: str) -> tuple[int, int]:
        """(objects, bytes) under a prefix of the bucket."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        )
        sizes = [o["Size"] for page in pages for o in page.get("Contents", [])]
        return len(sizes), sum(sizes)


def fill_pool(home: Path, uri: str, size: int) -> None:
    """A team pool of `size` synthetic insights, each shared by one member."""
    memory = Memory(load_settings(home, team_uri=uri, starter=False))
    assert memory.team is not None
    table = memory.team.table.open()  # creates the pool, as a first share would
    schema = insight_schema(384, team=True)
    for columns in synthetic_batches(size, seed=11, name="team"):
        columns[SHARED_BY] = [["m_bench"]] * len(columns["id"])
        table.add(pa.table(columns, schema=schema))
    memory.close()


def bench_load(home: Path, uri: str, runs: int) -> dict[str, Any]:
    """A fresh process's first load of the pool, and the keyword index after it."""
    loads, indexes = [], []
    for run in range(runs):
        memory = Memory(load_settings(home / f"load{run}", team_uri=uri, starter=False))
        assert memory.team is not None
        start = time.perf_counter()
        snapshot = memory.team.table.refresh()
        loads.append(time.perf_counter() - start)
        start = time.perf_counter()
        memory.team.tier.keywords(snapshot)
        indexes.append(time.perf_counter() - start)
        rows = len(snapshot)
        memory.close()
    return {
        "rows": rows,
        "load_p50_ms": median_ms(loads),
        "keyword_index_p50_ms": median_ms(indexes),
    }


def recall_samples(memory: Memory, reps: int) -> list[float]:
    samples = []
    for n in range(reps):
        start = time.perf_counter()
        memory.recall(PLANS[n % len(PLANS)])
        samples.append(time.perf_counter() - start)
    return samples


def bench_recall(personal: Path, uri: str, reps: int) -> dict[str, Any]:
    """Recall p50 of a 10,000 insight store alone and with a 10,000 insight pool."""
    alone = Memory(load_settings(personal, starter=False))
    both = Memory(load_settings(personal, team_uri=uri, starter=False, refresh_seconds=3600))
    for memory in (alone, both):
        memory.warm()
        recall_samples(memory, 5)
    assert both.team is not None and both.team.snapshot(wait=120) is not None
    assert any(h.source == "team" for p in PLANS for h in both.recall(p, k=20))
    timed: dict[str, list[float]] = {"alone": [], "both": []}
    for n in range(reps):  # alternating, so load on the machine hits both alike
        for name, memory in (("alone", alone), ("both", both)):
            start = time.perf_counter()
            memory.recall(PLANS[n % len(PLANS)])
            timed[name].append(time.perf_counter() - start)
    alone.close()
    both.close()
    result = {name: median_ms(samples) for name, samples in timed.items()}
    return {
        "personal_alone_p50_ms": result["alone"],
        "both_tiers_p50_ms": result["both"],
        "ratio": round(result["both"] / result["alone"], 3),
    }


def cli_recall_s(personal: Path, team_uri: str, runs: int = 4) -> dict[str, float]:
    """Median wall times of `mtl-mcp recall` (a fresh process: start-up, model, store), with
    the team pool at `team_uri` and without one, alternating; and the difference."""
    command = [str(Path(sys.executable).with_name("mtl-mcp")), "recall", PLANS[0]]
    samples: dict[str, list[float]] = {"personal_only_s": [], "with_pool_s": []}
    for _ in range(runs):
        for name, times in samples.items():
            env = {**os.environ, "MTL_MCP_HOME": str(personal), "MTL_MCP_STARTER": "0"}
            env["MTL_MCP_TEAM_URI"] = team_uri if name == "with_pool_s" else ""
            start = time.perf_counter()
            subprocess.run(command, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    medians = {name: round(statistics.median(times), 2) for name, times in samples.items()}
    medians["extra_s"] = round(medians["with_pool_s"] - medians["personal_only_s"], 2)
    return medians


def first_recalls(personal: Path, uri: str, runs: int = 3) -> list[float]:
    """A new Memory's first recall (model already loaded): what a CLI process pays."""
    samples = []
    for run in range(runs):
        fresh = Memory(load_settings(personal, team_uri=uri, starter=False))
        fresh.embedder.embed_query("warm up")
        start = time.perf_counter()
        fresh.recall(PLANS[run])
        samples.append(time.perf_counter() - start)
        fresh.close()
    return samples


def bench_outage(s3: S3, personal: Path, uri: str, reps: int) -> dict[str, Any]:
    """Recall while the pool is unreachable: with a snapshot loaded, and a fresh process."""
    cli = {"pool_up": cli_recall_s(personal, uri)}
    server = Memory(load_settings(personal, team_uri=uri, starter=False))
    server.warm()
    assert server.team is not None and server.team.snapshot(wait=120) is not None
    healthy = recall_samples(server, reps)
    s3.stop()
    deadline = time.monotonic() + 120
    while server.team_notice() is None:  # until a refresh (every 10 s) has failed
        assert time.monotonic() < deadline, "no refresh failed"
        recall_samples(server, 1)
        time.sleep(0.2)
    notice = server.team_notice()
    down = recall_samples(server, reps)
    fresh_refused = first_recalls(personal, uri)
    silent = socket.socket()  # accepts connections (the kernel's backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(100)
    os.environ["AWS_ENDPOINT"] = f"http://127.0.0.1:{silent.getsockname()[1]}"
    fresh_silent = first_recalls(personal, uri)
    cli["pool_silent"] = cli_recall_s(personal, uri)
    os.environ["AWS_ENDPOINT"] = s3.endpoint
    silent.close()
    server.close()
    s3.start()
    s3.client().create_bucket(Bucket=BUCKET)  # moto's server kept nothing
    return {
        "loaded_snapshot_healthy_p50_ms": median_ms(healthy),
        "loaded_snapshot_store_down_p50_ms": median_ms(down),
        "notice": notice,
        "fresh_process_first_recall_refused_p50_ms": median_ms(fresh_refused),
        "fresh_process_first_recall_silent_p50_ms": median_ms(fresh_silent),
        "first_load_wait_s": FIRST_LOAD_WAIT,
        "cli_recall_wall": cli,
    }


def _machine(
    home: str, uri: str, lessons: list[dict[str, Any]], chunk: int, ready: Any, go: Any, out: Any
) -> None:
    memory = Memory(load_settings(Path(home), team_uri=uri, starter=False))
    ids = [r.id for r in memory.record(lessons)]
    memory.warm()
    ready.put(True)
    go.wait()
    start = time.perf_counter()
    statuses = []
    for first in range(0, len(ids), chunk):
        statuses += [r.status for r in memory.share(ids[first : first + chunk])]
    out.put((time.perf_counter() - start, statuses))
    memory.close()


def bench_writes(
    s3: S3, root: Path, chunk: int, lessons: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """4 machines sharing 50 insights each at once, `chunk` per share call."""
    uri = f"s3://{BUCKET}/writes{chunk}"
    context = multiprocessing.get_context("spawn")
    ready, out, go = context.Queue(), context.Queue(), context.Event()
    machines = [
        context.Process(
            target=_machine,
            args=(str(root / f"w{chunk}-{n}"), uri, lessons[n], chunk, ready, go, out),
        )
        for n in range(MACHINES)
    ]
    for machine in machines:
        machine.start()
    for _ in machines:
        ready.get(timeout=600)
    start = time.perf_counter()
    go.set()
    results = [out.get(timeout=1200) for _ in machines]
    wall = time.perf_counter() - start
    for machine in machines:
        machine.join(60)
    statuses = [s for _, got in results for s in got]
    reader = Memory(load_settings(root / f"r{chunk}", team_uri=uri, starter=False))
    assert reader.team is not None
    rows = list(reader.team.rows())
    objects, size = s3.bytes_under(f"writes{chunk}/")
    # Once compaction has pruned the versions (what the pool settles to between bursts):
    with warnings.catch_warnings():  # it warns that readers of older versions fail: none
        warnings.simplefilter("ignore", UserWarning)
        reader.team.table.open().optimize(cleanup_older_than=timedelta(0))
    _, compacted = s3.bytes_under(f"writes{chunk}/")
    reader.close()
    return {
        "insights_per_share_call": chunk,
        "wall_s": round(wall, 2),
        "insights_per_s": round(len(statuses) / wall, 1),
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "rows": len(rows),
        "duplicate_ids": len(rows) - len({r["id"] for r in rows}),
        "objects": objects,
        "bytes_per_insight": round(size / len(rows)),
        "bytes_per_insight_compacted": round(compacted / len(rows)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 10k pool only, fewer reps")
    parser.add_argument("--out", type=Path, default=Path("bench-results/team.json"))
    args = parser.parse_args()
    reps = 40 if args.quick else 200
    s3 = S3()
    s3.start()
    report: dict[str, Any] = {"machine_cpus": os.cpu_count()}
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            report["snapshot_load"] = {}
            for size in (10_000,) if args.quick else (10_000, 100_000):
                uri = f"s3://{BUCKET}/pool{size}"
                fill_pool(root / f"fill{size}", uri, size)
                loaded = bench_load(root / f"l{size}", uri, 3)
                objects, stored = s3.bytes_under(f"pool{size}/")
                loaded.update(objects=objects, bytes_per_insight=round(stored / size))
                report["snapshot_load"][str(size)] = loaded
                print(f"pool {size}: {loaded}", flush=True)
            personal = root / "personal"
            fill_store(personal, 10_000)
            report["recall_10k_plus_10k"] = bench_recall(personal, f"s3://{BUCKET}/pool10000", reps)
            print(f"recall: {report['recall_10k_plus_10k']}", flush=True)
            report["outage"] = bench_outage(s3, personal, f"s3://{BUCKET}/pool10000", reps // 4)
            print(f"outage: {report['outage']}", flush=True)
            generated = distinct_lessons(MACHINES * EACH, load_settings(root / "gen"))
            per_machine = [generated[n * EACH : (n + 1) * EACH] for n in range(MACHINES)]
            report["writes"] = [bench_writes(s3, root, chunk, per_machine) for chunk in (10, 1)]
            for writes in report["writes"]:
                print(f"writes: {writes}", flush=True)
    finally:
        s3.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
