"""Stress: concurrent writers and readers on one store, then check that nothing was lost.

    python bench/stress.py [--writers 8] [--per-writer 50] [--readers 2] [--out FILE]

Each writer is its own `mtl-mcp serve` window, driven over MCP stdio, recording its
insights one `record_session` call at a time; meanwhile each reader (another window)
answers `recall_insights` in a loop until the writers are done. By default every window
relays to the one shared service; `--in-process` (MTL_MCP_SERVICE=off) gives each window
its own server on the same store, as before 0.2. The table is compacted every 50 versions,
so compaction runs under the storm too; the logs (at -v) are kept to count compactions and
tracebacks.

The insights are generated so that no two (and none and a starter insight) are near
duplicates: the maximum pairwise cosine similarity is checked to be below the dedup
threshold, so the expected outcome is exact: writers x per-writer new insights, every call
answered `stored`, no duplicate ids, no error surfaced to any caller. Recall latency is
measured by the readers during the storm (client side, over stdio).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does: 2 cores, no BLAS threads

import anyio
import numpy as np
from mcp import StdioServerParameters
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.index.embedder import get_embedder
from mtl_mcp.operations.service import stop_services
from mtl_mcp.schemas import InsightDraft
from mtl_mcp.text.lint import lint
from mtl_mcp.text.starter import starter_drafts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import PLANS  # the same plans as the main benchmark

SUBJECTS = [
    "database migrations", "flaky tests", "shell scripts", "API responses", "config files",
    "dependency upgrades", "log output", "error handling", "cache layers", "date parsing",
    "file uploads", "user input", "network retries", "build caches", "feature flags",
    "access control", "CSV imports", "thread pools", "memory leaks", "container images",
    "queue consumers", "search indexes", "email templates", "timezone handling", "webhooks",
    "rate limiters", "image resizing", "payment callbacks", "report exports", "cron jobs",
    "locale strings", "PDF generation", "socket servers", "GPU kernels", "notebook cells",
    "message schemas", "DNS records", "firmware updates", "spreadsheet formulas",
    "audio buffers", "map tiles", "game physics", "sensor readings", "browser storage",
]  # fmt: skip
ACTIONS = [
    "inspect before editing", "verify after changing", "isolate in a minimal reproduction",
    "read the documentation for", "write a failing test for", "measure before optimizing",
    "log the inputs of", "validate the schema of", "roll back quickly on problems with",
    "review the diff of", "pin the versions behind", "document the assumptions about",
]  # fmt: skip
MARGIN = 0.02  # generated lessons stay this far below the dedup threshold


def distinct_lessons(count: int, settings: Settings, seed: int = 7) -> list[dict[str, Any]]:
    """`count` lint-clean lessons, pairwise (and against the starter pack) below the dedup
    threshold by MARGIN; raises if the templates cannot supply that many."""
    pairs = list(itertools.product(SUBJECTS, ACTIONS))
    random.Random(seed).shuffle(pairs)
    candidates = [
        {
            "title": f"{action.capitalize()} {subject}",
            "description": f"When a task involves {subject}.",
            "content": f"When dealing with {subject}, {action} {subject} to avoid surprises later.",
        }
        for subject, action in pairs
    ]
    embedder = get_embedder(settings)
    starter = embedder.embed_documents([d.embedding_text() for d in starter_drafts()])
    limit = settings.dedup_threshold - MARGIN
    kept: list[dict[str, Any]] = []
    kept_vectors = np.zeros((0, starter.shape[1]), dtype=np.float32)
    for start in range(0, len(candidates), 64):  # embed only as many as needed
        chunk = candidates[start : start + 64]
        vectors = embedder.embed_documents(
            [InsightDraft.model_validate(c).embedding_text() for c in chunk]
        )
        for candidate, vector in zip(chunk, vectors, strict=True):
            if len(kept) == count or float((starter @ vector).max()) >= limit:
                continue
            if len(kept) and float((kept_vectors @ vector).max()) >= limit:
                continue
            if lint(InsightDraft.model_validate(candidate)).ok:
                kept.append(candidate)
                kept_vectors = np.vstack([kept_vectors, vector])
        if len(kept) == count:
            return kept
    raise SystemExit(f"only {len(kept)} distinct lessons available; lower the count")


def max_cosine(lessons: list[dict[str, Any]], settings: Settings) -> float:
    """The largest cosine similarity between two of `lessons` or one and a starter insight."""
    embedder = get_embedder(settings)
    vectors = embedder.embed_documents(
        [InsightDraft.model_validate(x).embedding_text() for x in lessons]
    )
    starter = embedder.embed_documents([d.embedding_text() for d in starter_drafts()])
    similar = vectors @ vectors.T
    np.fill_diagonal(similar, -1.0)
    return float(max(similar.max(), (vectors @ starter.T).max()))


@dataclass
class StormReport:
    writers: int
    per_writer: int
    readers: int
    wall_seconds: float = 0.0
    startup_seconds: float = 0.0
    stored: int = 0
    merged: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list, repr=False)
    recall_ms: list[float] = field(default_factory=list, repr=False)
    recalls_during_storm: int = 0
    ids: list[str] = field(default_factory=list, repr=False)
    stderr_logs: list[str] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        def pct(values: list[float], q: float) -> float:
            return round(float(np.percentile(values, q)), 1) if values else float("nan")

        data = {k: v for k, v in asdict(self).items() if k not in {"write_ms", "recall_ms", "ids"}}
        data.pop("stderr_logs")
        data.update(
            writes=len(self.write_ms),
            write_ms_p50=pct(self.write_ms, 50),
            write_ms_p90=pct(self.write_ms, 90),
            recall_ms_p50=pct(self.recall_ms, 50),
            recall_ms_p90=pct(self.recall_ms, 90),
            recall_ms_p99=pct(self.recall_ms, 99),
            recall_ms_max=round(max(self.recall_ms), 1) if self.recall_ms else None,
        )
        return data


def _server(home: Path, log: Path, service: bool) -> StdioServerParameters:
    """`mtl-mcp serve` with its stderr kept in `log` (the client passes only a few env vars)."""
    command = f"exec {sys.executable} -m mtl_mcp serve -v 2>>{log}"  # -v: compaction lines
    env = {"MTL_MCP_HOME": str(home), "PATH": os.environ["PATH"], "MTL_MCP_STARTER": "1"}
    env["MTL_MCP_SERVICE"] = "on" if service else "off"
    return StdioServerParameters(command="/bin/sh", args=["-c", command], env=env)


async def run_storm(
    home: Path,
    lessons: list[dict[str, Any]],
    writers: int,
    readers: int,
    pause: float = 0.0,
    service: bool = True,
) -> StormReport:
    """Drive the writers and readers (each pausing `pause` s between recalls) through the
    shared service or, with `service` off, each in its own server; return what every
    caller saw."""
    per_writer = len(lessons) // writers
    report = StormReport(writers=writers, per_writer=per_writer, readers=readers)
    logs = [home / "logs" / f"server-{n}.err" for n in range(writers + readers)]
    logs.append(home / "logs" / "service.log")  # the shared service every window relays to
    logs[0].parent.mkdir(parents=True, exist_ok=True)
    report.stderr_logs = [str(p) for p in logs]
    ready = anyio.Event()
    started = 0
    writers_done = 0
    storm_over = anyio.Event()
    begin = storm_start = time.perf_counter()

    async def connected(client: Client) -> None:
        """Wait until this server has loaded its model and every other server has too."""
        nonlocal started, storm_start
        warm = await client.call_tool("recall_insights", {"plan": PLANS[0], "k": 1})
        if warm.is_error:
            report.errors.append(f"warm-up: {warm.content}")
        started += 1
        if started == writers + readers:
            storm_start = time.perf_counter()
            report.startup_seconds = storm_start - begin
            ready.set()
        await ready.wait()  # every server up before the first write: a real storm

    async def writer(n: int) -> None:
        nonlocal writers_done
        mine = lessons[n * per_writer : (n + 1) * per_writer]
        try:
            async with Client(_server(home, logs[n], service), read_timeout_seconds=120) as client:
                await connected(client)
                for lesson in mine:
                    start = time.perf_counter()
                    result = await client.call_tool(
                        "record_session",
                        {"summary": "stress", "insights": [lesson], "project": "stress-bench"},
                    )
                    report.write_ms.append((time.perf_counter() - start) * 1000)
                    if result.is_error or not result.structured_content:
                        report.errors.append(f"writer {n}: {result.content}")
                        continue
                    for item in result.structured_content["results"]:
                        setattr(report, item["status"], getattr(report, item["status"]) + 1)
                        if item["status"] == "stored":
                            report.ids.append(item["id"])
        except Exception as exc:  # a crashed server or transport: the report says so
            report.errors.append(f"writer {n}: {type(exc).__name__}: {exc}")
        finally:
            writers_done += 1
            if writers_done == writers:
                storm_over.set()

    async def reader(n: int) -> None:
        try:
            async with Client(
                _server(home, logs[writers + n], service), read_timeout_seconds=120
            ) as c:
                await connected(c)
                turn = n
                while not storm_over.is_set():
                    plan = PLANS[turn % len(PLANS)]
                    turn += 1
                    start = time.perf_counter()
                    result = await c.call_tool("recall_insights", {"plan": plan, "k": 5})
                    report.recall_ms.append((time.perf_counter() - start) * 1000)
                    content = result.structured_content or {}
                    if result.is_error or len(content.get("results", [])) != 5:
                        report.errors.append(f"reader {n}: {result.content}")
                    report.recalls_during_storm += 1
                    await anyio.sleep(pause)
        except Exception as exc:  # a crashed server or transport: the report says so
            report.errors.append(f"reader {n}: {type(exc).__name__}: {exc}")

    async with anyio.create_task_group() as tasks:
        for n in range(writers):
            tasks.start_soon(writer, n)
        for n in range(readers):
            tasks.start_soon(reader, n)
    report.wall_seconds = time.perf_counter() - storm_start
    return report


def verify(settings: Settings, report: StormReport, lessons: list[dict[str, Any]]) -> list[str]:
    """Problems found in the store after the storm (empty when nothing was lost)."""
    problems = list(report.errors)
    store = Memory(settings)
    try:
        rows = list(store.export())
    finally:
        store.close()
    ids = [r.id for r in rows]
    if len(ids) != len(set(ids)):
        problems.append(f"{len(ids) - len(set(ids))} duplicate ids in the table")
    new = [r for r in rows if r.project == "stress-bench"]
    expected = {str(x["title"]) for x in lessons}
    if len(new) != len(lessons):
        problems.append(f"{len(new)} new insights in the table, expected {len(lessons)}")
    if {r.title for r in new} != expected:
        problems.append("the stored titles differ from the ones written")
    if report.stored != len(lessons) or report.merged or report.rejected:
        problems.append(
            f"callers saw {report.stored} stored, {report.merged} merged, "
            f"{report.rejected} rejected; expected {len(lessons)} stored"
        )
    if not set(report.ids) <= set(ids):
        problems.append("an id reported as stored is missing from the table")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--per-writer", type=int, default=50)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--out", type=Path, help="Also write the report as JSON here.")
    parser.add_argument(
        "--in-process", action="store_true", help="One server per window, no shared service."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mtl-stress-") as tmp:
        home = Path(tmp) / "home"
        settings = load_settings(home, starter=True)
        lessons = distinct_lessons(args.writers * args.per_writer, settings)
        closest = max_cosine(lessons, settings)
        Memory(settings).stats()  # the store and the starter pack exist before the storm
        before = sum(1 for _ in Memory(settings).export())
        report = anyio.run(
            run_storm, home, lessons, args.writers, args.readers, 0.0, not args.in_process
        )
        problems = verify(settings, report, lessons)
        logs = "".join(
            Path(p).read_text(errors="replace") for p in report.stderr_logs if Path(p).exists()
        )
        stop_services(settings.home)
        store = Memory(settings)
        table = store.table.open()
        summary = {
            **report.summary(),
            "insights_before": before,
            "insights_after": sum(1 for _ in store.export()),
            "max_cosine_between_written": round(closest, 3),
            "dedup_threshold": settings.dedup_threshold,
            "table_versions": len(table.list_versions()),
            "fragments": table.stats()["fragment_stats"]["num_fragments"],
            "compactions": logs.count("compacted the table"),
            "compactions_deferred_by_conflict": logs.count("compaction deferred"),
            "compactions_failed": logs.count("compaction skipped"),
            "server_tracebacks": logs.count("Traceback"),
            "writes_per_second": round(len(report.write_ms) / report.wall_seconds, 1),
            "problems": problems,
        }
        store.close()
    summary["mode"] = "in-process" if args.in_process else "service"
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
