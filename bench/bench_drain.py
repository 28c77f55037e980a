"""Drain rate: N entries through the console sink (output to /dev/null), fallback summaries.

python -m bench.bench_drain [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import redis.asyncio as aioredis

from bench.common import bench_redis_url, bench_settings, distinct_entry, peak_rss_mb
from bridge.runtime import open_runtime


async def main(n: int) -> None:
    url, server = bench_redis_url()
    client = aioredis.Redis.from_url(url)
    await client.flushdb()
    async with client.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.lpush(f"dead_letter:bench-{i % 4}", distinct_entry(i, f"bench-{i % 4}"))
        await pipe.execute()
    settings = bench_settings(url)
    with open(os.devnull, "w") as devnull:
        async with open_runtime(settings, stdout=devnull) as runtime:
            started = time.perf_counter()
            await runtime.pipeline.run(asyncio.Event(), burst=True)
            elapsed = time.perf_counter() - started
    archived = sum([await client.llen(f"dlq_bridge:alerted:{{dead_letter:bench-{q}}}") for q in range(4)])
    await client.flushdb()
    await client.aclose()
    if server:
        server.stop()
    print(f"drain: {n} entries, console sink -> /dev/null, fallback summaries, concurrency 64")
    print(f"  archived {archived} / {n} in {elapsed:.2f} s = {n / elapsed:,.0f} entries/s")
    print(f"  peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
