"""A client window's `mtl-mcp serve` driven in raw JSON-RPC over its stdio, so that tests
control exactly what is in flight (requests pipelined, processes killed mid-answer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any


class RawWindow:
    """`mtl-mcp serve` as a client starts it, spoken to line by line: started in `cwd`, and
    answering the server's `roots/list` with `roots` (folders) if given."""

    def __init__(
        self, env: dict[str, str], cwd: Path | None = None, roots: list[Path] | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("mtl-mcp")), "serve"],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        self.roots = roots

    def send(self, method: str, params: dict[str, Any], notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        return self.next_id

    def receive(self) -> dict[str, Any]:
        """The next answer (notifications are skipped, roots requests answered)."""
        stdout: IO[bytes] = self.process.stdout  # type: ignore[assignment]
        while True:
            line = stdout.readline()
            assert line, "the window closed its stdout"
            message: dict[str, Any] = json.loads(line)
            if message.get("method") == "roots/list" and "id" in message:
                self._answer_roots(message["id"])
            elif "id" in message:
                return message

    def _answer_roots(self, request_id: Any) -> None:
        roots = [{"uri": root.as_uri(), "name": root.name} for root in self.roots or []]
        answer = {"jsonrpc": "2.0", "id": request_id, "result": {"roots": roots}}
        stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(answer).encode() + b"\n")
        stdin.flush()

    def handshake(self) -> None:
        self.send(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {}} if self.roots is not None else {},
                "clientInfo": {"name": "raw-window", "version": "1"},
            },
        )
        assert "result" in self.receive()
        self.send("notifications/initialized", {}, notify=True)

    def close(self) -> None:
        """Close the window's stdin, as a client does at the end of a session."""
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(10)
