"""What one leave check costs (bridge.sources.leaving): a watched store of 10,000 alerted jobs, all held.

For a BullMQ failed set (ZSCORE per held id) and a Sidekiq dead set (members at the held score,
matched by jid), it prints the time of one full check pass with every job still there, the Redis
round trips (commands sent), the held keys' memory in Redis, and the time of a pass where 1,000
jobs were retried (each one judged and its resolve put in the outbox).

    python -m bench.bench_leave_check   # a private redis-server, or DLQ_BRIDGE_BENCH_REDIS_URL (flushed)
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

import redis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_redis_url
from bridge.delivery.resolve import Resolve
from bridge.sources.bullmq import bullmq_source
from bridge.sources.leaving import LeaveNote
from bridge.sources.sidekiq import sidekiq_source
from bridge.sources.watched import WatchedSource
from bridge.stores import keys
from bridge.stores.handoff import Parcel

JOBS = 10_000
RETRIED = 1_000
NOW = time.time()


def note(job_id: str) -> str:
    resolve = Resolve(dedup_key=job_id, idempotency_key=f"bullmq:q:{job_id}", digest="0123456789abcdef",
                      fingerprint="f" * 16, queue="q")
    return LeaveNote(("pagerduty",), resolve).encode()


def fill_bullmq(client: redis.Redis, cursor: str) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(JOBS):
            pipe.zadd("bull:q:failed", {str(i): 1_700_000_000_000 + i})
            pipe.hset(f"bull:q:{i}", "name", "send-invoice")
            pipe.zadd(keys.cursor_held(cursor), {str(i): 1_700_000_000_000 + i})
            pipe.hset(keys.cursor_held_notes(cursor), str(i), note(str(i)))
        pipe.execute()


def fill_sidekiq(client: redis.Redis, cursor: str) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(JOBS):
            at = NOW - JOBS + i
            job = {"class": "Hard", "queue": "default", "jid": f"jid{i:06}", "error_class": "E", "failed_at": at}
            pipe.zadd("dead", {json.dumps(job): at})
            pipe.zadd(keys.cursor_held(cursor), {f"jid{i:06}": at})
            pipe.hset(keys.cursor_held_notes(cursor), f"jid{i:06}", note(f"jid{i:06}"))
        pipe.execute()


async def one_pass(source: WatchedSource, client: redis.Redis) -> tuple[float, int, Counter[str]]:
    """A full pass over the held jobs (checks until the ZSCAN cursor comes back to 0)."""
    before = int(client.info("stats")["total_commands_processed"])
    queued: Counter[str] = Counter()
    started = time.perf_counter()

    async def forward(_outbox: str, _parcel: Parcel) -> None:
        return None

    queued += await source.check_leaving(forward)
    while source._sets and any(s._held_scan for s in source._sets.values()):  # until the pass ends
        queued += await source.check_leaving(forward)
    seconds = time.perf_counter() - started
    return seconds, int(client.info("stats")["total_commands_processed"]) - before - 1, queued


async def bench(kind: str, url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushdb()
    store, bridge = aioredis.Redis.from_url(url), aioredis.Redis.from_url(url)
    if kind == "bullmq":
        source = bullmq_source("bq", store, bridge, queues=["q"])
        fill_bullmq(client, "bq:q")
        held = "bq:q"
    else:
        source = sidekiq_source("sk", store, bridge, dead_max_jobs=JOBS * 2)
        fill_sidekiq(client, "sk")
        held = "sk"
    await source.rescan()
    memory = sum(int(client.memory_usage(k) or 0) for k in (keys.cursor_held(held), keys.cursor_held_notes(held)))
    seconds, commands, _ = await one_pass(source, client)
    print(f"{kind}: {JOBS:,} held, all still dead: a full check {seconds * 1000:.0f} ms, {commands} commands; "
          f"held keys {memory / 1024:.0f} KiB ({memory / JOBS:.0f} B per job)")
    members = client.zrange("bull:q:failed" if kind == "bullmq" else "dead", JOBS - RETRIED, -1)
    client.zrem("bull:q:failed" if kind == "bullmq" else "dead", *members)  # the newest 1,000 retried
    seconds, commands, queued = await one_pass(source, client)
    print(f"{kind}: {RETRIED:,} of them retried: a full check {seconds * 1000:.0f} ms, {commands} commands, "
          f"{sum(queued.values()):,} resolves queued")
    await store.aclose()
    await bridge.aclose()
    client.flushdb()
    client.close()


async def main() -> None:
    url, server = bench_redis_url()
    try:
        for kind in ("bullmq", "sidekiq"):
            await bench(kind, url)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
