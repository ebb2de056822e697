"""mtl-mcp next to a peer memory server, over MCP stdio, in one run on this machine.

    python bench/peers.py [--count 300] [--runs 5] [--searches 40] [--peer-dir DIR]
                          [--out bench-results/peers.json]

The peer is the official knowledge-graph memory server (`@modelcontextprotocol/server-memory`
from npm), installed once with npm into a temporary directory (or --peer-dir) and started with
`node`, so npx's own start-up is not counted. Both get the same generated memories:

1. Handshake: spawn -> `initialize` + `tools/list` answered; medians over alternating runs.
   mtl-mcp's first window starts the shared service, so the median is a new window's
   handshake with the service warm, as a user's second and later windows see it.
2. Writes: one memory per call, `record_session` (lint, deduplication, embedding, LanceDB)
   against `create_entities` (one entity, its description and content as observations,
   rewritten into a JSONL file); memories per second.
3. Search: `recall_insights` with a plan against `search_nodes`, whose case-insensitive
   substring match needs a single word, so it gets one (a plan would match nothing). The two
   searches do different work: this compares latency, not answers.

Prints the ratios (mtl-mcp / peer; below 1 means mtl-mcp is faster for times) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import StdioServerParameters
from mcp.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import PLANS, generated_insights

ROOT = Path(__file__).resolve().parent.parent
PEER_PACKAGE = "@modelcontextprotocol/server-memory"


def ms(samples: list[float], q: float = 50) -> float:
    return round(float(np.percentile(samples, q)) * 1000, 2)


def install_peer(where: Path) -> Path:
    """`npm install` the peer into `where` (once) and return its entry point."""
    entry = where / "node_modules" / PEER_PACKAGE / "dist" / "index.js"
    if not entry.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("npm is not installed: install Node.js 18+ to run the peer")
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
                str(where),
                PEER_PACKAGE,
            ],
            check=True,
        )
    return entry


def servers(work: Path, peer_entry: Path) -> dict[str, StdioServerParameters]:
    base = {"PATH": os.environ["PATH"]}
    return {
        "mtl": StdioServerParameters(
            command=sys.executable,
            args=["-m", "mtl_mcp", "serve"],
            env={**base, "MTL_MCP_HOME": str(work / "mtl-home"), "MTL_MCP_STARTER": "0"},
        ),
        "peer": StdioServerParameters(
            command=shutil.which("node") or "node",
            args=[str(peer_entry)],
            env={**base, "MEMORY_FILE_PATH": str(work / "peer-memory.jsonl")},
        ),
    }


async def handshake(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        return time.perf_counter() - start


def mtl_write(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "record_session", {
        "summary": "A generated session for the peer benchmark.",
        "outcome": "success",
        "insights": [item],
        "project": "bench/peers",
    }


def peer_write(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    entity = {
        "name": item["title"],
        "entityType": "insight",
        "observations": [item["description"], item["content"]],
    }
    return "create_entities", {"entities": [entity]}


async def session(
    params: StdioServerParameters,
    writes: list[tuple[str, dict[str, Any]]],
    searches: list[tuple[str, dict[str, Any]]],
) -> dict[str, Any]:
    """Write every memory one call at a time, then time the searches."""
    async with Client(params) as client:
        await client.list_tools()
        # Untimed: the first call pays for loading the embedding model and opening the store.
        name, arguments = searches[0]
        await client.call_tool(name, arguments)
        start = time.perf_counter()
        for name, arguments in writes:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
        write_s = time.perf_counter() - start
        samples = []
        for name, arguments in searches:
            start = time.perf_counter()
            result = await client.call_tool(name, arguments)
            samples.append(time.perf_counter() - start)
            assert not result.is_error, result.content
    return {
        "memories": len(writes),
        "write_s": round(write_s, 2),
        "writes_per_s": round(len(writes) / write_s, 1),
        "search_p50_ms": ms(samples),
        "search_p90_ms": ms(samples, 90),
    }


async def run(args: argparse.Namespace, work: Path, peer_entry: Path) -> dict[str, Any]:
    params = servers(work, peer_entry)
    times: dict[str, list[float]] = {"mtl": [], "peer": []}
    for _ in range(args.runs):
        for name in ("mtl", "peer"):  # alternating, so drift hits both alike
            times[name].append(await handshake(params[name]))
    memories = generated_insights(args.count)
    words = ["tests", "cache", "migrations", "retry", "config", "tokens", "imports", "flags"]
    results: dict[str, Any] = {
        "handshake_ms": {n: round(statistics.median(t) * 1000, 1) for n, t in times.items()},
        "mtl": await session(
            params["mtl"],
            [mtl_write(m) for m in memories],
            [
                ("recall_insights", {"plan": PLANS[n % len(PLANS)], "k": 3})
                for n in range(args.searches)
            ],
        ),
        "peer": await session(
            params["peer"],
            [peer_write(m) for m in memories],
            [("search_nodes", {"query": words[n % len(words)]}) for n in range(args.searches)],
        ),
    }
    mtl, peer = results["mtl"], results["peer"]
    results["ratios_mtl_over_peer"] = {
        "handshake": round(results["handshake_ms"]["mtl"] / results["handshake_ms"]["peer"], 2),
        "writes_per_s": round(mtl["writes_per_s"] / peer["writes_per_s"], 2),
        "search_p50": round(mtl["search_p50_ms"] / peer["search_p50_ms"], 2),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300, help="Memories written to each.")
    parser.add_argument("--runs", type=int, default=5, help="Handshakes per server.")
    parser.add_argument("--searches", type=int, default=40, help="Searches per server.")
    parser.add_argument("--peer-dir", type=Path, help="Where the peer is (to be) installed.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "peers.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mtl-peers-") as scratch:
        work = Path(scratch)
        peer_entry = install_peer(args.peer_dir or work / "peer")
        version = json.loads((peer_entry.parent.parent / "package.json").read_text())["version"]
        results = {
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "peer_package": f"{PEER_PACKAGE}@{version}",
            "node": subprocess.run(
                ["node", "--version"], capture_output=True, text=True, check=True
            ).stdout.strip(),
            **anyio.run(run, args, work, peer_entry),
        }
        # The windows started a shared service for this scratch home: stop it with the run.
        subprocess.run(
            [sys.executable, "-m", "mtl_mcp", "service", "stop"],
            env={**os.environ, "MTL_MCP_HOME": str(work / "mtl-home"), "MTL_MCP_STARTER": "0"},
            capture_output=True,
            check=False,
        )
    print(json.dumps(results, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
