"""Key flooding: 20,000 one-entry `dead_letter:*` keys, then an idle bridge.

Creates the keys in a private Redis, drains them with a real `dlq-bridge run`
process (console sink to /dev/null, fallback summaries), then measures the
process's CPU over ~10 s of idleness (utime + stime from /proc/<pid>/stat) and
the latency of a fresh alert: LPUSH to a drained key and to a new key, until
the entry is archived.

    python -m bench.hostile_keyspace [--keys 20000] [--idle-s 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import redis

from bench.common import bench_redis_url, service_config
from bench.peers import free_port
from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_healthz

BENCH_DB = 12


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid`, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def flood(client: redis.Redis, count: int) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(count):
            pipe.lpush(f"dead_letter:flood-{i}", json.dumps({"job_id": f"f{i}", "last_error": "boom"}))
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()


def drained(client: redis.Redis) -> bool:
    if any(True for _ in client.scan_iter(match="dead_letter:*", count=5000, _type="list")):
        return False
    return not any(True for _ in client.scan_iter(match=keys.PROCESSING_MATCH, count=5000))


def wait_until(predicate, timeout_s: float, interval: float = 0.005) -> float | None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if predicate():
            return time.perf_counter() - started
        time.sleep(interval)
    return None


def fresh_alert_s(client: redis.Redis, source: str) -> float | None:
    client.lpush(source, json.dumps({"job_id": f"fresh-{time.time()}", "last_error": "boom"}))
    before = client.llen(keys.alerted(source))
    return wait_until(lambda: client.llen(keys.alerted(source)) > before, 30)


def measure(url: str, count: int, idle_s: float) -> dict[str, float | None]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    flood(client, count)
    port = free_port()
    config = service_config(url, port, "bench-flood")
    proc = start_bridge(["--config", str(config), "run"])
    try:
        wait_healthz(port, proc, 60)
        started = time.perf_counter()
        drain_s = wait_until(lambda: drained(client), 600, 0.2)
        figures: dict[str, float | None] = {"drain_s": drain_s, "drain_wall_s": time.perf_counter() - started}
        time.sleep(1.0)
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(idle_s)
        figures["idle_cpu_pct"] = 100 * (cpu_seconds(proc.pid) - cpu0) / (time.perf_counter() - t0)
        figures["fresh_drained_key_s"] = fresh_alert_s(client, f"dead_letter:flood-{count // 2}")
        figures["fresh_new_key_s"] = fresh_alert_s(client, "dead_letter:fresh-after-flood")
        return figures
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        client.flushdb()
        client.close()


def main(argv: list[str] | None = None) -> dict[str, float | None]:
    """Run the bench and print its figures; `argv` None means the defaults (callable from other benches)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args([] if argv is None else argv)
    url, server = bench_redis_url(BENCH_DB)
    try:
        figures = measure(url, args.keys, args.idle_s)
    finally:
        if server:
            server.stop()
    show = {k: "n/a" if v is None else f"{v:.2f}" for k, v in figures.items()}
    print(f"hostile keyspace: {args.keys:,} one-entry dead_letter:* keys, real `dlq-bridge run`")
    print(f"  drained in {show['drain_s']} s")
    print(f"  idle CPU over {args.idle_s:.0f} s: {show['idle_cpu_pct']} % of a core")
    print(f"  fresh alert, drained key: {show['fresh_drained_key_s']} s; new key: {show['fresh_new_key_s']} s")
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
