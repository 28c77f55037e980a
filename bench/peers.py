"""Stand-alone local peers for the benches: a fake OpenClaw gateway and a webhook receiver.

Runs as its OWN process (uvicorn, uvloop + httptools when installed) on
127.0.0.1, so the peers never share the event loop of the bridge or of the
baseline they serve. One port serves everything:

    POST /v1/chat/completions   a valid summary (canned JSON) after --gateway-latency seconds
    POST /hook/<anything>       200; records the arrival time (time.time())
    GET  /stats                 counters as JSON
    GET  /arrivals              [[arrival, job_id, correlation_id], ...] (with --record)
    POST /reset                 zero the counters

    python -m bench.peers --port 18999 [--gateway-latency 0.0] [--record]

From a bench: `with PeersProcess(gateway_latency_s=2.0) as peers: peers.url ...`.
The handlers are raw ASGI (no framework) so the peers spend as little of the
shared CPU as possible; the bridge and the baseline pay the same peer cost.
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
from typing import Any

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

Scope = dict[str, Any]


class PeerApp:
    """The ASGI app: gateway + receiver + control endpoints, all counters in memory."""

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

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        body = await read_body(receive)
        if method == "POST" and path == "/v1/chat/completions":
            await self.chat(send)
        elif method == "POST" and path.startswith("/hook"):
            self.hook(body)
            await respond(send, 200, b"ok", b"text/plain")
        elif path == "/stats":
            await respond(send, 200, json.dumps(self.stats()).encode())
        elif path == "/arrivals":
            await respond(send, 200, json.dumps(self.arrivals()).encode())
        elif method == "POST" and path == "/reset":
            self.reset()
            await respond(send, 200, b"{}")
        else:
            await respond(send, 404, b"{}")

    async def chat(self, send: Any) -> None:
        self.gateway_calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        await respond(send, 200, COMPLETION)

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


async def read_body(receive: Any) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


async def respond(send: Any, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
    import uvicorn

    parser = argparse.ArgumentParser(description="local fake gateway + webhook receiver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gateway-latency", type=float, default=0.0)
    parser.add_argument("--record", action="store_true", help="keep webhook bodies for /arrivals")
    args = parser.parse_args()
    app = PeerApp(args.gateway_latency, args.record)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                lifespan="off", loop="auto", http="auto", backlog=4096)


if __name__ == "__main__":
    main()
