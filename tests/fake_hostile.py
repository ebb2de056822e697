"""A broken or hostile HTTP server on 127.0.0.1: it answers every request as scripted,
byte by byte if asked, and records how much of each answer the client took.

    with HostileServer() as server:
        server.answer(b'{"choices": ...}')                   # any body, sent at once
        server.answer(drip=b"x" * 100, interval=0.5)         # a byte each 0.5 s in the body
        server.answer(drip_headers=True, interval=0.5)       # the headers themselves dripped
        server.answer(size=400 << 20)                        # 400 MB of a JSON string
        ...  # point MTL_MCP_OPENAI_BASE_URL at server.base_url
        server.hung_up      # answers the client stopped reading before their end

Raw sockets, not http.server: a dripped header is something http.server cannot send. With
no scripted answer left it serves the last one again. Closing the server stops every drip.
"""

from __future__ import annotations

import socket
import socketserver
from dataclasses import dataclass

from tests.fake_http import LoopbackServer, RecordedRequest
from tests.waiting import wait_for


@dataclass(frozen=True)
class Answer:
    body: bytes = b""
    status: int = 200
    drip: bytes = b""  # sent a byte at a time after `body`, `interval` apart
    drip_headers: bool = False
    interval: float = 0.5
    size: int = 0  # a JSON string of this many bytes, streamed as fast as the client reads


class HostileServer(LoopbackServer[RecordedRequest]):
    """A scripted raw-socket server on 127.0.0.1; a context manager (`LoopbackServer`)."""

    request_class = RecordedRequest

    def __init__(self) -> None:
        self._answers: list[Answer] = [Answer(b"{}")]
        self._next = 0
        self.hung_up = 0  # answers the client closed before their last byte
        self.served = 0
        super().__init__()

    def _handler_class(self) -> type[socketserver.BaseRequestHandler]:
        fake = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                fake._serve(self.request)

        return Handler

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def answer(self, body: bytes = b"", **options: object) -> None:
        """Script the next answer (see `Answer`); the first call replaces the default."""
        with self._lock:
            if self._next == 0 and self._answers == [Answer(b"{}")]:
                self._answers = []
            self._answers.append(Answer(body, **options))  # type: ignore[arg-type]

    def always(self, body: bytes = b"", **options: object) -> None:
        """From now on, answer every request so (a fuzzer sets one answer per example)."""
        with self._lock:
            self._answers, self._next = [Answer(body, **options)], 0  # type: ignore[arg-type]

    def _take(self) -> Answer:
        with self._lock:
            answer = self._answers[min(self._next, len(self._answers) - 1)]
            self._next += 1
            return answer

    def _serve(self, sock: socket.socket) -> None:
        if not _read_request(sock):
            return
        answer = self._take()
        try:
            finished = self._send(sock, answer)
        except OSError:  # the client hung up: what a deadline or a cap should do
            finished = False
        if self._closing.is_set():
            return
        with self._lock:
            if finished:
                self.served += 1
            else:
                self.hung_up += 1

    def _send(self, sock: socket.socket, answer: Answer) -> bool:
        """Send `answer`; False once the client has closed the connection before its end."""
        length = len(answer.body) + len(answer.drip) + (answer.size + 2 if answer.size else 0)
        head = (
            f"HTTP/1.1 {answer.status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {length}\r\nconnection: close\r\n\r\n"
        ).encode()
        if answer.drip_headers:
            for byte in head[:-2]:
                if self._closing.wait(answer.interval) or _peer_gone(sock):
                    return False
                sock.sendall(bytes([byte]))
            head = head[-2:]
        sock.sendall(head + answer.body)
        for byte in answer.drip:
            if self._closing.wait(answer.interval) or _peer_gone(sock):
                return False
            sock.sendall(bytes([byte]))
        if answer.size:
            sock.sendall(b'"')
            chunk = b"a" * 65536
            left = answer.size
            while left > 0 and not self._closing.is_set():
                sock.sendall(chunk[: min(left, len(chunk))])
                left -= len(chunk)
            sock.sendall(b'"')
        return True

    def wait_hung_up(self, count: int) -> None:
        """Until the client has hung up on `count` answers (a drip notices at its next byte)."""
        wait_for(lambda: self.hung_up >= count, f"the client to hang up on {count} answers")


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the client closed its end (a read would say so without waiting)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _read_request(sock: socket.socket) -> bool:
    """Read one request (headers, and a body of its content-length); False if the client
    went away first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True
