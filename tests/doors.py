"""Every front door, driven as a user's tools drive it, for differential tests.

    cli(env, "recall", plan, "--json", cwd=folder)           # the real `mtl-mcp`, a process
    async with stdio_window(env, roots=[folder]) as client:  # a client window: the relay
        await recall_ids(client, plan)                        # to the shared service
    with HttpServer(env) as server: ...                       # `serve --transport http`
    hook(env, "session-start", {"cwd": str(folder)})          # a client's hook

`env` is the environment a client passes (its config's `env` block on top of the user's);
nothing here imports the code under test beyond the public schemas.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ListRootsResult, Root

MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """A client's environment for data directory `home`: this test's, plus `extra`."""
    env = {**os.environ, "MTL_MCP_HOME": str(home), **extra}
    env.pop("CLAUDE_PROJECT_DIR", None)
    env.update(extra)
    return env


def cli(
    env: dict[str, str], *args: str, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp ARGS` as a user types it."""
    return subprocess.run(
        [MTL_MCP, *args],
        env=env,
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=180,
    )


def cli_json(env: dict[str, str], *args: str, cwd: Path | None = None) -> Any:
    done = cli(env, *args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def hook(
    env: dict[str, str], event: str, payload: dict[str, Any], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp hook EVENT` with the client's JSON on stdin."""
    done = cli(env, "hook", event, cwd=cwd, input=json.dumps(payload))
    assert done.returncode == 0, done.stderr
    return done


def roots_answer(folders: Sequence[Path]) -> Any:
    async def roots(_: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=f.as_uri()) for f in folders])  # type: ignore[arg-type]

    return roots


@contextlib.asynccontextmanager
async def stdio_window(
    env: dict[str, str], cwd: Path | None = None, roots: Sequence[Path] | None = None
) -> AsyncIterator[Client]:
    """A client window: `mtl-mcp serve` over stdio, through the real MCP client. A window
    with roots speaks the handshake era's protocol (a 2026-07-28 server cannot ask)."""
    params = StdioServerParameters(command=MTL_MCP, args=["serve"], env=env, cwd=cwd)
    if roots is None:
        async with Client(params, read_timeout_seconds=120) as client:
            yield client
    else:
        async with Client(
            params, read_timeout_seconds=120, list_roots_callback=roots_answer(roots), mode="legacy"
        ) as client:
            yield client


async def tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def recall_ids(client: Client, plan: str, **arguments: Any) -> list[str]:
    return [insight for insight, _ in await recall_answers(client, plan, **arguments)]


async def recall_answers(client: Client, plan: str, **arguments: Any) -> list[tuple[str, float]]:
    """recall_insights' results: each insight's id and relevance gate probability."""
    found = await tool(client, "recall_insights", plan=plan, **arguments)
    return [(r["id"], r["p"]) for r in found["results"]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    """`mtl-mcp serve --transport http` on loopback, for the duration of a `with`."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.env = env

    def __enter__(self) -> HttpServer:
        self.process = subprocess.Popen(
            [MTL_MCP, "serve", "--transport", "http", "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 90
        while True:
            assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
            try:
                httpx.get(self.url, timeout=1)
                return self
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the HTTP server never answered"
                time.sleep(0.1)

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(15)

    @contextlib.asynccontextmanager
    async def client(self, roots: Sequence[Path] | None = None) -> AsyncIterator[Client]:
        if roots is None:
            async with Client(self.url, read_timeout_seconds=120) as connected:
                yield connected
        else:
            async with Client(
                self.url,
                read_timeout_seconds=120,
                list_roots_callback=roots_answer(roots),
                mode="legacy",
            ) as connected:
                yield connected


@contextlib.contextmanager
def chdir(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)
