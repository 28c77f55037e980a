"""Peak RSS of the bridge service while it drains a large backlog.

The backlog is pushed first, then `python -m bridge --config <file> run`
starts as a subprocess and drains it; `/proc/<pid>/status` is sampled
(VmRSS) and VmHWM (the kernel's high-water mark) read at the end. In-flight
work is bounded by `sources.concurrency`, so the peak must not grow with the
backlog.

    python -m bench.bench_memory [--entries 50000] [--path console|webhook]

`console`: console sink to /dev/null, fallback summaries (no [openclaw]).
`webhook`: the peers process (instant gateway + receiver): every entry costs
a gateway call and a signed POST (slower: about 4x the run time).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import time

import redis

from bench.common import bench_redis_url, distinct_entry, peers_toml, service_config, vm_kb
from bench.peers import PeersProcess, free_port
from tests.support.bridge_process import start_bridge, wait_healthz

BENCH_DB = 13
QUEUE = "memory"
ARCHIVE = "dlq_bridge:alerted:{dead_letter:memory}"


def push(client: redis.Redis, n: int) -> None:
    client.flushdb()
    with client.pipeline(transaction=False) as pipe:
        for start in range(0, n, 1000):
            pipe.lpush(f"dead_letter:{QUEUE}", *[distinct_entry(i, QUEUE) for i in range(start, min(n, start + 1000))])
        pipe.execute()


def watch(proc: subprocess.Popen[bytes], client: redis.Redis, n: int, timeout_s: float) -> dict[str, float]:
    """Sample RSS until the archive holds `n` entries; start/peak figures in MB."""
    started = time.perf_counter()
    first_rss = vm_kb(proc.pid, "VmRSS")
    samples = []
    while client.llen(ARCHIVE) < n and time.perf_counter() - started < timeout_s:
        samples.append(vm_kb(proc.pid, "VmRSS"))
        time.sleep(0.1)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "archived": client.llen(ARCHIVE), "start_mb": first_rss / 1024,
            "peak_sampled_mb": max(samples or [0]) / 1024, "hwm_mb": vm_kb(proc.pid, "VmHWM") / 1024,
            "end_mb": vm_kb(proc.pid, "VmRSS") / 1024}


def measure(args: argparse.Namespace, url: str, peers: PeersProcess | None) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    push(client, args.entries)
    port = free_port()
    extra = peers_toml(peers.url) if peers else ""
    config = service_config(url, port, "bench-memory", extra)
    proc = start_bridge(["--config", str(config), "run"])
    try:
        wait_healthz(port, proc)
        return watch(proc, client, args.entries, args.timeout)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        client.flushdb()
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--path", choices=["console", "webhook"], default="console")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    try:
        if args.path == "webhook":
            with PeersProcess() as peers:
                r = measure(args, url, peers)
        else:
            r = measure(args, url, None)
    finally:
        if server:
            server.stop()
    what = "console sink -> /dev/null, fallback summaries" if args.path == "console" else \
        "instant gateway + signed webhook sink"
    print(f"memory: `python -m bridge run` draining {args.entries:,} distinct entries ({what}), "
          f"sources.concurrency 32 (default)")
    print(f"  archived {r['archived']:,} in {r['seconds']:.1f} s ({r['archived'] / r['seconds']:,.0f} entries/s); "
          f"RSS after start {r['start_mb']:.0f} MB, peak (VmHWM) {r['hwm_mb']:.0f} MB, at the end {r['end_mb']:.0f} MB "
          f"(target peak <= 150 MB: {'met' if r['hwm_mb'] <= 150 else 'MISSED'})")


if __name__ == "__main__":
    main()
