"""Throughput of the OpenClaw path, and the storm cache hit rate.

A fake gateway (uvicorn on loopback) answers every chat completion after a
fixed latency. Entries with distinct fingerprints go through the real
pipeline (real Redis, console sink into a buffer), so every entry costs one
gateway call and throughput is bounded by max_concurrency / latency.
Then a storm of identical failures shows what the cache and coalescing save.

    python bench/bench_gateway.py [--entries 400] [--latency 0.2] [--concurrency 8]
    python -m bench.bench_gateway   # a private redis-server, or DLQ_BRIDGE_BENCH_REDIS_URL (flushed)

Only keys of this run are touched (a unique `dead_letter:bench-<id>` queue),
so the bench is safe on a shared Redis database.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_redis_url
from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve


def settings_for(redis_url: str, gateway_url: str, source: str, concurrency: int) -> Settings:
    return Settings(
        redis={"url": redis_url, "consumer_id": "bench-" + source.rsplit("-", 1)[-1]},
        sources={"match": source, "poll_interval_s": 0.01, "rescan_interval_s": 0.5},
        openclaw={"url": gateway_url, "token": "bench-token", "max_concurrency": concurrency,
                  "calls_per_minute": 0, "timeout_s": 10},
        sinks=[{"name": "console", "type": "console", "color": False}],
    )


async def push(client: aioredis.Redis, source: str, entries: list[bytes]) -> None:
    for start in range(0, len(entries), 500):
        await client.lpush(source, *entries[start : start + 500])


async def drain(settings: Settings) -> tuple[Runtime, float]:
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        started = time.perf_counter()
        await runtime.pipeline.run(asyncio.Event(), burst=True)
        return runtime, time.perf_counter() - started


def count(runtime: Runtime, source: str) -> float:
    labels = {"source": source, "reason": ""}
    return runtime.metrics.registry.get_sample_value("dlq_bridge_summaries_total", labels) or 0.0


async def cleanup(client: aioredis.Redis, source: str) -> None:
    async for key in client.scan_iter(match=f"*{source}*", count=1000):
        await client.delete(key)


async def distinct(args: argparse.Namespace, client: aioredis.Redis, url: str) -> dict[str, Any]:
    gateway = FakeGateway(latency_s=args.latency)
    source = f"dead_letter:bench-{uuid.uuid4().hex[:8]}"
    entries = [envelope_entry(queue=source.removeprefix("dead_letter:"), job_id=f"j{i}",
                              job_name=f"job_{i}") for i in range(args.entries)]
    await push(client, source, entries)
    async with serve(gateway.app()) as gw_url:
        runtime, seconds = await drain(settings_for(url, gw_url, source, args.concurrency))
    await cleanup(client, source)
    return {"seconds": seconds, "calls": gateway.calls, "peak": gateway.peak_in_flight,
            "openclaw": count(runtime, "openclaw")}


async def storm(args: argparse.Namespace, client: aioredis.Redis, url: str) -> dict[str, Any]:
    gateway = FakeGateway(latency_s=args.latency)
    source = f"dead_letter:bench-{uuid.uuid4().hex[:8]}"
    queue = source.removeprefix("dead_letter:")
    await push(client, source, [envelope_entry(queue=queue, job_id=f"j{i}") for i in range(args.storm)])
    async with serve(gateway.app()) as gw_url:
        runtime, seconds = await drain(settings_for(url, gw_url, source, args.concurrency))
    await cleanup(client, source)
    return {"seconds": seconds, "calls": gateway.calls, "cache": count(runtime, "cache")}


async def main(args: argparse.Namespace) -> None:
    url, server = bench_redis_url(10)
    client = aioredis.Redis.from_url(url)
    try:
        d = await distinct(args, client, url)
        s = await storm(args, client, url)
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
    ideal = args.concurrency / args.latency
    rate = args.entries / d["seconds"]
    print(f"gateway path: {args.entries} distinct fingerprints, latency {args.latency * 1000:.0f} ms, "
          f"max_concurrency {args.concurrency}")
    print(f"  {rate:.1f} entries/s (ideal {ideal:.1f}/s, {rate / ideal:.0%} of ideal); "
          f"{d['calls']} gateway calls, peak {d['peak']} in flight, {d['seconds']:.2f} s")
    print(f"storm: {args.storm} entries of one fingerprint: {s['calls']} gateway call(s), "
          f"cache hit rate {s['cache'] / args.storm:.1%}, {args.storm / s['seconds']:.0f} entries/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--storm", type=int, default=1000)
    asyncio.run(main(parser.parse_args()))
