"""End-to-end latency, LPUSH → receipt at the webhook receiver, at a steady rate.

The bridge runs as the real service (`python -m bridge --config <file> run`,
a subprocess, service defaults except the peers' [openclaw] and one webhook
sink). The producer stamps `time.time()` into each entry (`correlation_id`)
right before its LPUSH; the receiver (`bench/peers.py`, its own process)
records `time.time()` on arrival. Same machine, same clock. Each entry is a
distinct failure, so each costs a (instant) gateway call and a signed POST.

    python -m bench.bench_latency [--rate 50] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import time

import redis

from bench.common import bench_redis_url, distinct_entry, peers_toml, service_config
from bench.peers import PeersProcess, free_port
from tests.support.bridge_process import start_bridge, wait_healthz

BENCH_DB = 13
QUEUE = "latency"


def stamped(i: int) -> bytes:
    entry = json.loads(distinct_entry(i, QUEUE))
    entry["correlation_id"] = f"sent-{time.time():.6f}"
    return json.dumps(entry).encode()


def produce(client: redis.Redis, rate: float, seconds: float, first: int = 0) -> int:
    """LPUSH `rate` entries a second for `seconds`, on a fixed schedule; the count pushed."""
    n = int(rate * seconds)
    start = time.perf_counter()
    for i in range(n):
        pause = start + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        client.lpush(f"dead_letter:{QUEUE}", stamped(first + i))
    return n


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def measure(args: argparse.Namespace, url: str, peers: PeersProcess) -> list[float]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    produce(client, 100, 0.2, first=-1000)  # warm-up: the DLQ exists when the bridge starts
    port = free_port()
    config = service_config(url, port, "bench-latency", peers_toml(peers.url))
    proc = start_bridge(["--config", str(config), "run"])
    try:
        wait_healthz(port, proc)
        peers.wait_posts(20, 30)
        peers.reset()
        n = produce(client, args.rate, args.seconds)
        stats = peers.wait_posts(n, 60)
        if stats["webhook_posts"] < n:
            print(f"  WARNING: only {stats['webhook_posts']} of {n} entries arrived")
        arrivals = peers.arrivals()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        client.flushdb()
        client.close()
    return [(at - float(corr.removeprefix("sent-"))) * 1000 for at, _job, corr in arrivals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="entries per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    try:
        with PeersProcess(record=True) as peers:
            ms = measure(args, url, peers)
    finally:
        if server:
            server.stop()
    print(f"latency: LPUSH -> webhook receipt, {args.rate:g} entries/s for {args.seconds:g} s, "
          f"bridge = `python -m bridge run` (service defaults), instant gateway")
    print(f"  {len(ms)} entries: p50 {percentile(ms, 50):.1f} ms, p95 {percentile(ms, 95):.1f} ms, "
          f"p99 {percentile(ms, 99):.1f} ms, max {max(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms "
          f"(target p99 <= 250 ms: {'met' if percentile(ms, 99) <= 250 else 'MISSED'})")


if __name__ == "__main__":
    main()
