"""Recall with a team pool 20 ms away, over MCP stdio through the relay and the service.

    python bench/remote_pool.py [--personal 10000] [--pool 300] [--reps 300]
                                [--stall-seconds 30] [--teammate-every 0]
                                [--out bench-results/remote_pool.json]

The S3 server is moto's ThreadedMotoServer on 127.0.0.1, behind a TCP proxy that delivers
every chunk of bytes 10 ms after it arrived, in each direction: each HTTP request and its
answer take one 20 ms round trip more than on loopback. (moto closes its connection after
every answer, so each request is also a new connection; the proxy adds nothing for the
handshake, as a kept-alive connection to a server 20 ms away would not pay one.) Both run in
a child process, so the server's Python threads do not compete with the client being timed.
The proxy counts the connections and requests it forwards, and can stall: hold every byte,
like a server that accepts and never answers, until it is resumed.

Setup (not timed): a team pool of `--pool` real, distinct lessons shared into the bucket
(`Memory.share`, straight to the server), and a personal store of `--personal` synthetic
insights (random unit vectors, bench/benchmark.py's generator), copied into three data
directories: `alone` (no pool), `both` (the pool, through the proxy) and `empty` (a pool
URI nobody has shared to yet, through the proxy). Each is a project's window: the real
`mtl-mcp serve` relay started by `mcp.client.Client` with CLAUDE_PROJECT_DIR set, so each
data directory has its own warm service, with the default 10 s refresh interval.

1. Steady state: recall_insights with 3-sentence plans, alternating alone and both one call
   each (which goes first alternates too), after both are warm and the pool's snapshot is
   loaded: client-side p50/p90, and the requests that reached the proxy meanwhile (the
   background refresh's one LIST per interval is expected; a recall's own, none).
2. `mtl-mcp recall` from a shell, alternating with and without the pool, through the
   running services and in-process (MTL_MCP_SERVICE=off, which loads the pool first): wall
   time, medians.
3. The pool stalls (`--stall-seconds`, longer than a refresh interval, so each service's
   refresh starts against the stalled server): recall p50/p90 of the three windows,
   alternating, and how many answers carried the team notice.

`--teammate-every S`: another member shares a new lesson every S seconds during phase 1, so
each refresh of `both` loads a new pool version (snapshot, keyword index) while it recalls.
Medians from one run; this 2-core machine is shared, so compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI and server set it
os.environ.setdefault("LANCEDB_LOG", "error")

sys.path.insert(0, str(Path(__file__).resolve().parent))

ONE_WAY = 0.010  # seconds the proxy holds every chunk, each direction: a 20 ms round trip
BUCKET = "bench"
HTTP_METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ")
VARIANTS = ("alone", "both", "empty")


# -- the S3 server 20 ms away (in a child process) ------------------------------------------------


class DelayingProxy:
    """An asyncio TCP proxy to a loopback port: ONE_WAY seconds of latency each way,
    counters, and a stall switch (call its methods in its loop's thread)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.connections = 0
        self.requests = 0  # chunks from a client that start an HTTP request
        self.port = 0
        self.flowing = asyncio.Event()
        self.flowing.set()

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: bool
    ) -> None:
        """Copy bytes one way, each chunk delivered ONE_WAY seconds after it arrived
        (latency, not bandwidth: chunks in flight overlap), none while stalled."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def pump() -> None:
            while True:
                try:
                    data = await reader.read(1 << 16)
                except ConnectionError:
                    data = b""
                if count and data.startswith(HTTP_METHODS):
                    self.requests += 1
                queue.put_nowait((loop.time() + ONE_WAY, data))
                if not data:
                    return

        async def deliver() -> None:
            try:
                while True:
                    due, data = await queue.get()
                    if (wait := due - loop.time()) > 0:
                        await asyncio.sleep(wait)
                    await self.flowing.wait()
                    if not data:
                        if writer.can_write_eof():
                            writer.write_eof()
                        return
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                return

        await asyncio.gather(pump(), deliver())

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self.flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(
                self._forward(reader, up_writer, True), self._forward(up_reader, writer, False)
            )
        finally:
            for w in (writer, up_writer):
                w.close()

    async def serve(self, ready: threading.Event) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await server.serve_forever()


def serve_s3(pipe: multiprocessing.connection.Connection) -> None:
    """The child: moto on loopback and the proxy in front; answers the bench's commands."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    _, moto_port = moto.get_host_and_port()
    proxy, ready = DelayingProxy(moto_port), threading.Event()
    loop = asyncio.new_event_loop()
    threading.Thread(
        target=lambda: loop.run_until_complete(proxy.serve(ready)), daemon=True
    ).start()
    ready.wait()
    pipe.send((moto_port, proxy.port))
    while True:
        try:
            command = pipe.recv()
        except EOFError:
            break
        if command == "counters":
            pipe.send({"connections": proxy.connections, "requests": proxy.requests})
        elif command == "stall":
            loop.call_soon_threadsafe(proxy.flowing.clear)
            pipe.send(True)
        elif command == "resume":
            loop.call_soon_threadsafe(proxy.flowing.set)
            pipe.send(True)
        elif command == "stop":
            break
    moto.stop()


class RemoteS3:
    """The child process, its two ports, and its proxy's counters and stall switch."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pipe, child = ctx.Pipe()
        self.process = ctx.Process(target=serve_s3, args=(child,), daemon=True)
        self.process.start()
        self.moto_port, self.proxy_port = self._pipe.recv()

    def env(self, near: bool) -> dict[str, str]:
        """The AWS_* variables for the S3 server: on loopback (near) or behind the proxy."""
        endpoint = f"http://127.0.0.1:{self.moto_port if near else self.proxy_port}"
        return {
            "AWS_ENDPOINT": endpoint,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
        }

    def ask(self, command: str) -> Any:
        self._pipe.send(command)
        return self._pipe.recv()

    def stop(self) -> None:
        self._pipe.send("stop")
        self.process.join(30)


# -- setup ----------------------------------------------------------------------------------------


def setup(
    work: Path, s3: RemoteS3, personal: int, pool: int, spare: int
) -> tuple[str, list[dict[str, Any]]]:
    """Fill the pool and the three homes; (the pool's URI, `spare` lessons not shared yet)."""
    import boto3
    from benchmark import fill_store
    from stress import distinct_lessons

    from mtl_mcp import Memory
    from mtl_mcp.config import load_settings

    os.environ.update(s3.env(near=True))
    boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT"]).create_bucket(Bucket=BUCKET)
    uri = f"s3://{BUCKET}/pool"
    sharer = Memory(load_settings(work / "sharer", team_uri=uri, starter=False))
    lessons = distinct_lessons(pool + spare, sharer.settings)
    lessons, extra = lessons[:pool], lessons[pool:]
    ids = [r.id for r in sharer.record(lessons) if r.status == "stored"]
    for start in range(0, len(ids), 50):
        results = sharer.share(ids[start : start + 50])
        assert all(r.status == "shared" for r in results), results
    sharer.close()
    (work / "project").mkdir()
    fill_store(work / "alone", personal)
    for name in VARIANTS[1:]:
        shutil.copytree(work / "alone", work / name)
    return uri, extra


def teammate(
    home: Path, env: dict[str, str], uri: str, lessons: list[dict[str, Any]], every: float
) -> None:
    """Another member: shares one new lesson every `every` seconds, straight to the S3
    server (a child process, stopped by the bench)."""
    os.environ.update(env)
    from mtl_mcp import Memory
    from mtl_mcp.config import load_settings

    member = Memory(load_settings(home, team_uri=uri, starter=False))
    for lesson in lessons:
        time.sleep(every)
        [recorded] = member.record([lesson])
        member.share([recorded.id])


def window_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """A window's environment, as Claude Code starts `mtl-mcp serve` in a project."""
    return {
        "MTL_MCP_HOME": str(home),
        "CLAUDE_PROJECT_DIR": str(home.parent / "project"),
        "MTL_MCP_STARTER": "0",
        "PATH": os.environ["PATH"],
        **extra,
    }


def variant_envs(s3: RemoteS3, uri: str) -> dict[str, dict[str, str]]:
    """What each window adds to its environment."""
    far = s3.env(near=False)
    return {
        "alone": {},
        "both": {**far, "MTL_MCP_TEAM_URI": uri},
        "empty": {**far, "MTL_MCP_TEAM_URI": f"s3://{BUCKET}/nobody-shared-yet"},
    }


# -- the measurements -----------------------------------------------------------------------------


def summary(samples: list[float]) -> dict[str, float]:
    from benchmark import median_ms, p90_ms

    return {"p50_ms": median_ms(samples), "p90_ms": p90_ms(samples), "n": len(samples)}


async def bench_mcp(
    work: Path,
    envs: dict[str, dict[str, str]],
    s3: RemoteS3,
    reps: int,
    stall_seconds: float,
    between: Any = None,
) -> dict[str, Any]:
    """Phases 1 and 3; `between` (blocking, no arguments) runs between them."""
    from benchmark import PLANS
    from mcp import StdioServerParameters
    from mcp.client import Client

    command = str(Path(sys.executable).with_name("mtl-mcp"))

    def params(name: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=command, args=["serve"], env=window_env(work / name, envs[name])
        )

    async def recall(client: Client, n: int) -> tuple[float, dict[str, Any]]:
        start = time.perf_counter()
        result = await client.call_tool("recall_insights", {"plan": PLANS[n % len(PLANS)]})
        elapsed = time.perf_counter() - start
        assert not result.is_error, result.content
        return elapsed, result.structured_content or {}

    async with (
        Client(params("alone")) as alone,
        Client(params("both")) as both,
        Client(params("empty")) as empty,
    ):
        clients = {"alone": alone, "both": both, "empty": empty}
        deadline = time.monotonic() + 300
        while True:  # warm: the model, the keyword index, the pool's snapshot loaded
            _, content = await recall(both, 0)
            _, nothing = await recall(empty, 0)
            sources = {r["source"] for r in content.get("results", [])}
            if "team" in sources and not content.get("notice") and not nothing.get("notice"):
                break
            assert time.monotonic() < deadline, (content, nothing)
            await asyncio.sleep(0.5)
        for client in clients.values():
            for n in range(12):
                await recall(client, n)

        # 1. steady state
        before = s3.ask("counters")
        timed: dict[str, list[float]] = {"alone": [], "both": []}
        team_hits = 0
        started = time.monotonic()
        for n in range(reps):
            for name in ("alone", "both") if n % 2 == 0 else ("both", "alone"):
                elapsed, content = await recall(clients[name], n)
                timed[name].append(elapsed)
                if name == "both":
                    team_hits += sum(r["source"] == "team" for r in content["results"])
        seconds = time.monotonic() - started
        after = s3.ask("counters")
        steady = {
            "personal_alone": summary(timed["alone"]),
            "two_tier": summary(timed["both"]),
            "ratio_p50": round(
                statistics.median(timed["both"]) / statistics.median(timed["alone"]), 3
            ),
            "team_hits_per_recall": round(team_hits / reps, 2),
            "seconds": round(seconds, 1),
            "proxy_requests_during": after["requests"] - before["requests"],
        }
        print(json.dumps({"steady": steady}, indent=2), flush=True)
        if between is not None:
            await asyncio.to_thread(between)

        # 3. the pool stalls
        stalled: dict[str, list[float]] = {name: [] for name in VARIANTS}
        notices = dict.fromkeys(VARIANTS, 0)
        s3.ask("stall")
        try:
            started = time.monotonic()
            n = 0
            while time.monotonic() - started < stall_seconds:
                order = VARIANTS[n % 3 :] + VARIANTS[: n % 3]
                for name in order:
                    elapsed, content = await recall(clients[name], n)
                    stalled[name].append(elapsed)
                    notices[name] += bool(content.get("notice"))
                n += 1
        finally:
            s3.ask("resume")
    outage = {
        name: {**summary(samples), "with_notice": notices[name]}
        for name, samples in stalled.items()
    }
    return {"steady": steady, "stalled": {"seconds": stall_seconds, **outage}}


def bench_cli(work: Path, envs: dict[str, dict[str, str]], runs: int) -> dict[str, Any]:
    """`mtl-mcp recall` wall times, alternating with and without the pool: through the
    running services (kept by the windows of phase 1), and in-process."""
    from benchmark import PLANS

    command = [str(Path(sys.executable).with_name("mtl-mcp")), "recall", PLANS[0]]
    samples: dict[str, list[float]] = {}
    for mode, extra in (("service", {}), ("in_process", {"MTL_MCP_SERVICE": "off"})):
        for _ in range(runs):
            for name in ("alone", "both"):
                env = {**os.environ, **window_env(work / name, {**envs[name], **extra})}
                start = time.perf_counter()
                done = subprocess.run(command, env=env, capture_output=True, text=True)
                samples.setdefault(f"{mode}_{name}_s", []).append(time.perf_counter() - start)
                assert done.returncode == 0, done.stderr
                if name == "both" and "team pool" not in done.stdout:
                    raise AssertionError(f"no team insight recalled: {done.stdout}{done.stderr}")
    return {name: round(statistics.median(times), 3) for name, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personal", type=int, default=10_000)
    parser.add_argument("--pool", type=int, default=300)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--cli-runs", type=int, default=5)
    parser.add_argument("--stall-seconds", type=float, default=30.0)
    parser.add_argument("--teammate-every", type=float, default=0.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results/remote_pool.json"))
    args = parser.parse_args()
    from mtl_mcp.config import load_settings
    from mtl_mcp.operations.service import stop_service

    s3 = RemoteS3()
    work = Path(tempfile.mkdtemp(prefix="mtl-remote-pool-"))
    other = None
    try:
        load = os.getloadavg()
        spare = 200 if args.teammate_every else 0
        uri, extra = setup(work, s3, args.personal, args.pool, spare)
        envs = variant_envs(s3, uri)
        if args.teammate_every:
            other = multiprocessing.get_context("spawn").Process(
                target=teammate,
                args=(work / "teammate", s3.env(near=True), uri, extra, args.teammate_every),
                daemon=True,
            )
            other.start()
        cli: dict[str, Any] = {}

        def cli_phase() -> None:
            if other is not None:
                other.terminate()
            cli.update(bench_cli(work, envs, args.cli_runs))
            print(json.dumps({"cli": cli}, indent=2), flush=True)

        mcp = asyncio.run(bench_mcp(work, envs, s3, args.reps, args.stall_seconds, cli_phase))
        print(json.dumps({"stalled": mcp["stalled"]}, indent=2), flush=True)
        result = {
            "setup": {
                "personal_insights": args.personal,
                "pool_insights": args.pool,
                "round_trip_ms": 2 * ONE_WAY * 1000,
                "delay": "10 ms per chunk in each direction (a 20 ms round trip per request)",
                "teammate_shares_every_s": args.teammate_every or None,
                "load_average_before": [round(x, 2) for x in load],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
            },
            "mcp_stdio_through_service": mcp,
            "cli_recall": cli,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    finally:
        if other is not None:
            other.terminate()
        for name in VARIANTS:
            stop_service(load_settings(work / name))
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
