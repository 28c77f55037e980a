"""Console render time: the overview (and a source, an entry, the API overview) of a loaded bridge.

Seeds a private Redis with 10 DLQs of 1,000 dead letters each (10 causes per DLQ), runs the
real `dlq-bridge run` (uvicorn, console on, console sink to /dev/null, a Slack sink grouping by
fingerprint that holds its 100 groups open) until all 10,000 entries are archived, then times
GET requests from this process over loopback HTTP: median and p95 of N sequential requests.

    python -m bench.bench_console [--requests 200] [--sources 10] [--per-source 1000]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import time
import urllib.parse

import httpx
import redis

from bench.common import bench_redis_url, service_config
from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_healthz
from tests.support.redis_server import free_port

BENCH_DB = 11
CAUSES = 10
TARGET_MS = 100.0


def seed(client: redis.Redis, sources: int, per_source: int) -> None:
    client.flushdb()
    for s in range(sources):
        entries = [
            json.dumps({
                "job_id": f"q{s}-job-{i}", "job_name": f"task_{i % CAUSES}", "attempts": 3,
                "last_error": f"RuntimeError: step {i % CAUSES} failed on worker {i}",
                "payload_excerpt": json.dumps({"order": i}),
            })
            for i in range(per_source)
        ]
        for i in range(0, len(entries), 1000):
            client.lpush(f"dead_letter:queue-{s}", *entries[i : i + 1000])


def archived(client: redis.Redis, sources: int) -> int:
    return sum(int(client.llen(keys.alerted(f"dead_letter:queue-{s}"))) for s in range(sources))


def timed(http: httpx.Client, url: str, n: int) -> tuple[float, float, int]:
    """Median and p95 in ms over `n` sequential GETs (after 5 warm-up requests), and the body size."""
    for _ in range(5):
        http.get(url).raise_for_status()
    times, size = [], 0
    for _ in range(n):
        start = time.perf_counter()
        response = http.get(url)
        times.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
        size = len(response.content)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], size


def config_toml() -> str:
    return (
        '[console]\nenabled = true\n'
        '[[sinks]]\nname = "console"\ntype = "console"\n'
        '[[sinks]]\nname = "slack-held"\ntype = "slack"\nurl = "http://127.0.0.1:9/never"\n'
        'group_by = "fingerprint"\ngroup_wait_s = 3600\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--sources", type=int, default=10)
    parser.add_argument("--per-source", type=int, default=1000)
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    client = redis.Redis.from_url(url)
    port = free_port()
    proc = None
    try:
        seed(client, args.sources, args.per_source)
        config = service_config(url, port, "bench-console", config_toml())
        proc = start_bridge(["--config", str(config), "run"], env={"DLQ_BRIDGE_CONSOLE_TOKEN": "bench-console-token"})
        wait_healthz(port, proc)
        started, total = time.perf_counter(), args.sources * args.per_source
        while archived(client, args.sources) < total:
            time.sleep(0.2)
        print(f"console: {args.sources} sources, {total} archived entries "
              f"(drained in {time.perf_counter() - started:.1f} s), {args.requests} sequential GETs over loopback")
        report(port, args.requests)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        client.flushdb()
        client.close()
        if server is not None:
            server.stop()


def report(port: int, n: int) -> None:
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=30) as http:
        page = http.get("/api/v1/entries", params={"source": "dead_letter:queue-0", "limit": 1}).json()
        entry_id = page["entries"][0]["id"]
        source = urllib.parse.quote("dead_letter:queue-0", safe="")
        for label, path in [
            ("overview page  /console/", "/console/"),
            ("overview JSON  /api/v1/overview", "/api/v1/overview"),
            ("source page    /console/source (25 newest)", f"/console/source?key={source}"),
            ("entry page     /console/entry", f"/console/entry?source={source}&id={entry_id}"),
        ]:
            median, p95, size = timed(http, path, n)
            mark = "  (target < 100 ms)" if path == "/console/" else ""
            print(f"  {label:<44} median {median:6.1f} ms   p95 {p95:6.1f} ms   {size / 1024:6.1f} KiB{mark}")


if __name__ == "__main__":
    main()
