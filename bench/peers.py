"""Stand-alone local peers for the benches: a fake OpenClaw gateway and a webhook receiver.

Runs as its OWN process (asyncio on uvloop, requests parsed by httptools) on
127.0.0.1, so the peers never share the event loop of the bridge or of the
baseline they serve. One port serves everything:

    POST /v1/chat/completions   a valid summary (canned JSON) after --gateway-latency seconds
    POST /hook/<anything>       200; records the arrival time (time.time())
    GET  /stats                 counters as JSON
    GET  /arrivals              [[arrival, job_id, correlation_id], ...] (with --record)
    POST /reset                 zero the counters

    python -m bench.peers --port 18999 [--gateway-latency 0.0] [--record]

From a bench: `with PeersProcess(gateway_latency_s=2.0) as peers: peers.url ...`.
The server is a bare `asyncio.Protocol` (no ASGI server, no framework) so the
peers spend as little of the shared CPU as possible (about half of what a raw ASGI
app under uvicorn spent); the bridge and the baseline pay the same peer cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import httpx

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = {
    "title": "bench: job failed (model)",
    "severity": "error",
    "likely_cause": "The model read the error and blames the dependency.",
    "next_steps": ["Check the dependency", "Redrive the job"],
    "runbook_hint": "",
}
COMPLETION = json.dumps({
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": json.dumps(SUMMARY)}}],
}).encode()
SOURCES = ("openclaw", "cache", "fallback")

Reply = tuple[int, bytes, bytes]  # status, body, content type
STATUS = {200: b"200 OK", 404: b"404 Not Found"}


class PeerApp:
    """Gateway + receiver + control endpoints, all counters in memory."""

    def __init__(self, gateway_latency_s: float, record: bool) -> None:
        self.latency = gateway_latency_s
        self.record = record
        self.reset()

    def reset(self) -> None:
        self.gateway_calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.posts = 0
        self.first_post: float | None = None
        self.last_post: float | None = None
        self.sources = dict.fromkeys(SOURCES, 0)
        self.bodies: list[tuple[float, bytes]] = []

    def handle(self, method: bytes, path: bytes, body: bytes) -> Reply:
        if method == b"POST" and path.startswith(b"/hook"):
            self.hook(body)
            return 200, b"ok", b"text/plain"
        if path == b"/stats":
            return 200, json.dumps(self.stats()).encode(), b"application/json"
        if path == b"/arrivals":
            return 200, json.dumps(self.arrivals()).encode(), b"application/json"
        if method == b"POST" and path == b"/reset":
            self.reset()
            return 200, b"{}", b"application/json"
        return 404, b"{}", b"application/json"

    def chat_started(self) -> None:
        self.gateway_calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def chat_done(self) -> Reply:
        self.in_flight -= 1
        return 200, COMPLETION, b"application/json"

    def hook(self, body: bytes) -> None:
        now = time.time()
        self.posts += 1
        self.first_post = self.first_post or now
        self.last_post = now
        for source in SOURCES:
            if b'"summary_source":"' + source.encode() in body:
                self.sources[source] += 1
        if self.record:
            self.bodies.append((now, body))

    def stats(self) -> dict[str, Any]:
        return {
            "gateway_calls": self.gateway_calls,
            "gateway_peak_in_flight": self.peak_in_flight,
            "webhook_posts": self.posts,
            "first_post": self.first_post,
            "last_post": self.last_post,
            "summary_sources": self.sources,
        }

    def arrivals(self) -> list[tuple[float, str, str]]:
        out = []
        for at, body in self.bodies:
            alert = json.loads(body)
            out.append((at, str(alert.get("job_id")), str(alert.get("correlation_id"))))
        return out


class PeerProtocol(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection, parsed by httptools (no framework: the least CPU per request)."""

    def __init__(self, app: PeerApp) -> None:
        import httptools

        self.app = app
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url, self.body = b"", bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except Exception:  # a malformed request: drop the connection
            assert self.transport is not None
            self.transport.close()

    def on_message_begin(self) -> None:
        self.url, self.body = b"", bytearray()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method, path = self.parser.get_method(), self.url.split(b"?", 1)[0]
        keep_alive = self.parser.should_keep_alive()
        if method == b"POST" and path == b"/v1/chat/completions":
            self.app.chat_started()
            if self.app.latency:
                later = asyncio.get_running_loop().call_later
                later(self.app.latency, lambda: self.reply(self.app.chat_done(), keep_alive))
                return
            self.reply(self.app.chat_done(), keep_alive)
            return
        self.reply(self.app.handle(method, path, bytes(self.body)), keep_alive)

    def reply(self, reply: Reply, keep_alive: bool) -> None:
        status, body, content_type = reply
        assert self.transport is not None
        if self.transport.is_closing():
            return
        head = b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (
            STATUS[status], content_type, len(body))
        self.transport.write(head + body)
        if not keep_alive:
            self.transport.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PeersProcess:
    """Runs `python -m bench.peers` as a child process; a context manager."""

    def __init__(self, gateway_latency_s: float = 0.0, record: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--port", str(self.port), "--gateway-latency", str(gateway_latency_s)]
        if record:
            self.args.append("--record")
        self._proc: subprocess.Popen[bytes] | None = None
        self._http = httpx.Client(timeout=30.0)

    def __enter__(self) -> PeersProcess:
        self._proc = subprocess.Popen([sys.executable, "-m", "bench.peers", *self.args], cwd=ROOT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"peers exited with {self._proc.returncode}")
            try:
                self.stats()
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self._proc.kill()
        raise RuntimeError("peers did not start")

    def __exit__(self, *_exc: object) -> None:
        self._http.close()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def stats(self) -> dict[str, Any]:
        return dict(self._http.get(self.url + "/stats").json())

    def reset(self) -> None:
        self._http.post(self.url + "/reset")

    def arrivals(self) -> list[tuple[float, str, str]]:
        return [(float(a), j, c) for a, j, c in self._http.get(self.url + "/arrivals").json()]

    def wait_posts(self, n: int, timeout_s: float) -> dict[str, Any]:
        """Poll until the receiver has `n` webhook posts (or the timeout); the last stats."""
        deadline = time.monotonic() + timeout_s
        stats = self.stats()
        while stats["webhook_posts"] < n and time.monotonic() < deadline:
            time.sleep(0.05)
            stats = self.stats()
        return stats


def main() -> None:
    parser = argparse.ArgumentParser(description="local fake gateway + webhook receiver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gateway-latency", type=float, default=0.0)
    parser.add_argument("--record", action="store_true", help="keep webhook bodies for /arrivals")
    args = parser.parse_args()
    app = PeerApp(args.gateway_latency, args.record)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(app, args.port))


async def serve(app: PeerApp, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: PeerProtocol(app), "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    main()
