"""An S3 API server on loopback (moto's threaded server) and a fresh bucket per test.

The code under test reaches it exactly as it would reach MinIO or AWS: plain S3 over HTTP,
configured by the standard AWS_* variables (or the config file's [storage] table).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

REGION = "us-east-1"
KEY_ID = "testing-key-id"
SECRET = "testing-secret-" + "9f8e7d6c5b4a"  # moto accepts any credentials


@dataclass(frozen=True)
class Bucket:
    """A bucket on the test's S3 server."""

    endpoint: str
    name: str

    def uri(self, prefix: str) -> str:
        return f"s3://{self.name}/{prefix}"

    @property
    def env(self) -> dict[str, str]:
        """The standard variables LanceDB (and boto3, and pyarrow) read."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
        )

    def object_keys(self, prefix: str = "") -> list[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def holding(self, needle: str, prefix: str = "") -> list[str]:
        """Keys of every object under `prefix` whose bytes contain `needle`."""
        s3 = self.client()
        return [
            key
            for key in self.object_keys(prefix)
            if needle.encode() in s3.get_object(Bucket=self.name, Key=key)["Body"].read()
        ]


class S3Server:
    """moto's S3 API on 127.0.0.1; stop() and start() again on the same port (moto keeps
    the buckets in this process), to play an outage."""

    def __init__(self, port: int = 0) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        host, self.port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{self.port}"

    def stop(self) -> None:
        self._server.stop()  # werkzeug closes the listening socket: connections are refused

    def bucket(self) -> Bucket:
        bucket = Bucket(self.endpoint, f"t-{uuid.uuid4().hex[:12]}")
        bucket.client().create_bucket(Bucket=bucket.name)
        return bucket


class Proxy:
    """A TCP proxy in front of the S3 server that counts the HTTP requests it forwards, and
    can stall: hold every request (those `passing` lets through aside) unanswered, like a
    server that accepts connections and never answers, until `resume()`. moto answers one
    request per connection, so a request is held by holding its connection."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.forwarded = 0  # requests that reached the server
        self.held = 0  # requests waiting now for the stall to end
        self._passing: Callable[[bytes], bool] | None = None
        self._flowing = threading.Event()
        self._flowing.set()
        self._count = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="test-proxy", daemon=True).start()

    def stall(self, passing: Callable[[bytes], bool] | None = None) -> None:
        """Hold requests from now on; `passing(request line)` may let some through."""
        self._passing = passing
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self.resume()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            first = client.recv(1 << 16)
            passing = self._passing
            if not self._flowing.is_set() and not (passing and passing(first.split(b"\r\n")[0])):
                with self._count:
                    self.held += 1
                self._flowing.wait()
                with self._count:
                    self.held -= 1
            with socket.create_connection(("127.0.0.1", self.upstream)) as server:
                with self._count:
                    self.forwarded += 1
                server.sendall(first)
                back = threading.Thread(target=_pump, args=(server, client), daemon=True)
                back.start()
                _pump(client, server)
                back.join()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture
def bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A new bucket (moto's LIST cost grows with a bucket's objects), with the AWS_*
    variables pointing at it."""
    made = s3_server.bucket()
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made
