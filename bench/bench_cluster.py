"""Drain rate on a local Redis Cluster vs a single Redis, same run (issue 15).

N distinct entries over 20 DLQs, fallback summaries, console sink to /dev/null, one bridge
in process (`open_runtime` + `pipeline.run(burst=True)`, concurrency 64), against:
- one redis-server (the embedded one);
- a local 6-node cluster (3 masters, 3 replicas: tests/support/redis_cluster.py), with
  `wait_replicas = 0`, then `wait_replicas = 1` (a WAIT after each hand-off and forward).

All servers share this machine's cores with the bridge, so the figures compare the client
paths (slot routing, one connection pool per node, WAIT round trips), not what three real
masters on three hosts would give.

    python -m bench.bench_cluster [N]     # default 10000
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from redis.asyncio.cluster import RedisCluster

from bench.common import bench_redis_url, bench_settings, distinct_entry
from bridge.clients.redis_client import build_redis
from bridge.clients.replicas import ReplicaWait
from bridge.runtime import open_runtime
from bridge.settings import Settings, load_settings
from bridge.stores import keys
from tests.support.redis_cluster import start_local_cluster

DLQS = 20


async def seed(url: str, cluster: bool, n: int) -> None:
    client = RedisCluster.from_url(url) if cluster else build_redis(url, bench_settings(url).redis)
    if cluster:
        await client.flushall(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.flushdb()
    async with client.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.lpush(f"dead_letter:bench-{i % DLQS}", distinct_entry(i, f"bench-{i % DLQS}"))
        await pipe.execute()
    await client.aclose()


async def archived(url: str, cluster: bool) -> int:
    client = RedisCluster.from_url(url) if cluster else build_redis(url, bench_settings(url).redis)
    total = sum([int(await client.llen(keys.alerted(f"dead_letter:bench-{q}"))) for q in range(DLQS)])
    await client.aclose()
    return total


def settings_for(url: str, redis_toml: str) -> Settings:
    path = Path(tempfile.mkdtemp()) / "bench.toml"
    path.write_text(
        f'[redis]\nurl = "{url}"\nconsumer_id = "bench"\n{redis_toml}\n'
        "[sources]\nconcurrency = 64\npoll_interval_s = 0.01\narchive_max = 100000\n"
    )
    return load_settings(path, {})


async def one(label: str, url: str, n: int, toml: str = "") -> None:
    cluster = "cluster = true" in toml
    await seed(url, cluster, n)
    settings = settings_for(url, toml)
    with open(os.devnull, "w") as devnull:
        async with open_runtime(settings, stdout=devnull) as runtime:
            started = time.perf_counter()
            await runtime.pipeline.run(asyncio.Event(), burst=True)
            elapsed = time.perf_counter() - started
    done = await archived(url, cluster)
    print(f"  {label:<38} {done:>6} / {n} archived in {elapsed:6.2f} s = {n / elapsed:7,.0f} entries/s")


async def sequential(url: str, replicas: int, n: int = 2000) -> float:
    """Microseconds per hand-off-sized write (one script) in a row, with or without its WAIT."""
    settings = settings_for(url, "cluster = true")
    client = build_redis(url, settings.redis)
    wait = ReplicaWait(client, replicas, 1.0)
    script = client.register_script("redis.call('LPUSH', KEYS[1], ARGV[1]) return 1")
    await wait.script(script, [b"dlq_bridge:alerted:{dead_letter:seq}"], ["warm"])
    started = time.perf_counter()
    for i in range(n):
        await wait.script(script, [b"dlq_bridge:alerted:{dead_letter:seq}"], [str(i)])
    took = time.perf_counter() - started
    await client.aclose()
    return took / n * 1e6


async def main(n: int) -> None:
    single_url, server = bench_redis_url()
    local = start_local_cluster()
    try:
        print(f"drain: {n} entries over {DLQS} DLQs, console sink -> /dev/null, fallback summaries, concurrency 64")
        await one("single Redis", single_url, n)
        await one("cluster, 3 masters, wait_replicas = 0", local.url, n, "cluster = true")
        await one("cluster, 3 masters, wait_replicas = 1", local.url, n, "cluster = true\nwait_replicas = 1")
        await one("single Redis (again, warm)", single_url, n)
        rounds = [(await sequential(local.url, 0), await sequential(local.url, 1)) for _ in range(3)]
        plain, waited = min(r[0] for r in rounds), min(r[1] for r in rounds)  # the least disturbed round
        print(f"one hand-off write at a time on the cluster: {plain:,.0f} µs without WAIT, "
              f"{waited:,.0f} µs with WAIT 1 (+{waited - plain:,.0f} µs per entry)")
    finally:
        local.stop()
        if server:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
