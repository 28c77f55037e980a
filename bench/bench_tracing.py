"""What the bridge's own tracing costs: CPU per entry with tracing off (this tree and main's) and on.

One run, interleaved, so the machine's drift hits every variant alike. Each drain is a child
process (`open_runtime` + `pipeline.run(burst=True)` on uvloop, as `bench_throughput` does) on
fresh distinct entries (one gateway call and one signed webhook POST each, `bench/peers.py`),
with the code of its tree on PYTHONPATH:

- `main, off`: the main checkout (`--main`, default /work/main): today's code path;
- `this, off`: this tree, no `[tracing]` (the plain `Pipeline`, the no-op telemetry);
- `this, on`: this tree exporting every span over OTLP/HTTP to a local receiver (a process of
  its own, decoding each export with `opentelemetry-proto` and counting the spans);
- `this, on 10%`: the same with `sample_ratio = 0.1`.

CPU is the child's own (`time.process_time()` from the started runtime to its close, the last
flush of spans and the exporter's thread included; start-up and imports not), divided by the
entries; the figure per variant is the median of `--runs`, and the ratios are to `main, off`.

    python -m bench.bench_tracing [--entries 3000] [--runs 3] [--main /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench.common import bench_redis_url
from bench.peers import PeersProcess, free_port

HERE = Path(__file__).resolve().parent.parent

CHILD = """
import asyncio, json, sys, time
from bench.common import bench_settings, distinct_entry, peers_toml, push_entries, run
from bridge.runtime import freeze_heap, open_runtime
url, peers, tracing, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
push_entries(url, "dead_letter:tr", (distinct_entry(i, "tr") for i in range(n)))
settings = bench_settings(url, peers_toml(peers) + tracing)

async def timed():
    async with open_runtime(settings) as runtime:
        freeze_heap()  # as the service does once started
        cpu, wall = time.process_time(), time.perf_counter()
        await runtime.pipeline.run(asyncio.Event(), burst=True)
        seconds = time.perf_counter() - wall
    return time.process_time() - cpu, seconds  # the close (and the last flush of spans) included

cpu, seconds = run(timed())
print(json.dumps({"cpu": cpu, "seconds": seconds}))
"""


class SpanCounter(BaseHTTPRequestHandler):
    """POST /v1/traces: decode, count; GET: the count so far."""

    spans = 0

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = ExportTraceServiceRequest.FromString(body)
        SpanCounter.spans += sum(len(s.spans) for r in message.resource_spans for s in r.scope_spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        body = str(SpanCounter.spans).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


def serve_receiver(port: int) -> None:
    ThreadingHTTPServer(("127.0.0.1", port), SpanCounter).serve_forever()


def one_drain(tree: Path, url: str, peers: PeersProcess, tracing: str, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, peers.url, tracing, str(n)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--main", type=Path, default=Path("/work/main"))
    parser.add_argument("--receiver", type=int, help=argparse.SUPPRESS)  # the receiver process itself
    args = parser.parse_args()
    if args.receiver:
        serve_receiver(args.receiver)
        return
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    receiver = subprocess.Popen([sys.executable, "-m", "bench.bench_tracing", "--receiver", str(port)], cwd=HERE)
    on = f'[tracing]\notlp_endpoint = "{endpoint}"\n'
    variants = {
        "main, off": (args.main, ""),
        "this, off": (HERE, ""),
        "this, on": (HERE, on),
        "this, on 10%": (HERE, on + "sample_ratio = 0.1\n"),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    spans: dict[str, list[int]] = {name: [] for name in variants}
    url, server = bench_redis_url(12)
    try:
        wait_for_receiver(port)
        with PeersProcess() as peers:
            for _ in range(args.runs):
                for name, (tree, tracing) in variants.items():
                    before = received(port)
                    results[name].append(one_drain(tree, url, peers, tracing, args.entries))
                    spans[name].append(received(port) - before)
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
        if server is not None:
            server.stop()
    report(results, spans, args.entries)


def wait_for_receiver(port: int) -> None:
    for _ in range(200):
        try:
            received(port)
            return
        except httpx.HTTPError:
            threading.Event().wait(0.05)
    raise RuntimeError("the OTLP receiver did not start")


def received(port: int) -> int:
    return int(httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text)


def report(results: dict[str, list[dict[str, float]]], spans: dict[str, list[int]], n: int) -> None:
    per_entry = {name: statistics.median(r["cpu"] for r in runs) / n * 1000 for name, runs in results.items()}
    base = per_entry["main, off"]
    print(f"bench_tracing: {n} entries a drain, {len(next(iter(results.values())))} runs a variant (median)")
    print(f"{'variant':<14} {'CPU ms/entry':>12} {'vs main':>8} {'entries/s':>10} {'spans/entry':>12}  runs (ms/entry)")
    for name, runs in results.items():
        rate = statistics.median(n / r["seconds"] for r in runs)
        shown = ", ".join(f"{r['cpu'] / n * 1000:.3f}" for r in runs)
        print(
            f"{name:<14} {per_entry[name]:>12.3f} {per_entry[name] / base:>8.3f} {rate:>10.0f} "
            f"{statistics.median(spans[name]) / n:>12.2f}  {shown}"
        )


if __name__ == "__main__":
    main()
