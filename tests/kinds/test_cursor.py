"""The cursor over owner-held sorted sets: once per dead job across restarts, replicas and trimming."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from bridge.sources.kinds import KindRecord
from bridge.sources.sidekiq import sidekiq_source
from bridge.sources.watched import WatchedSource
from bridge.stores import keys
from bridge.stores.cursor import Cursor, Position

NOW = 1_800_000_000.0


@pytest.fixture
async def clients(redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[list[aioredis.Redis]]:
    made: list[aioredis.Redis] = []

    def make() -> aioredis.Redis:
        client = aioredis.Redis.from_url(redis_url)
        made.append(client)
        return client

    yield [make() for _ in range(6)]
    for client in made:
        await client.aclose()


def die(client: redis.Redis, jid: str, at: float) -> None:
    """What Sidekiq's `send_to_morgue` does: ZADD the job JSON at the time of death."""
    job = {"class": "Hard", "queue": "default", "jid": jid, "error_class": "E", "error_message": "m", "failed_at": at}
    client.zadd("dead", {json.dumps(job): at})


def source(store: aioredis.Redis, bridge: aioredis.Redis, now: float = NOW, lease_s: float = 30) -> WatchedSource:
    return sidekiq_source("sk", store, bridge, lease_s=lease_s, clock=lambda: now)


async def take_all(reader: WatchedSource) -> list[KindRecord]:
    out = []
    while (record := await reader.claim()) is not None:
        assert await reader.ack(record.receipt)
        out.append(record)
    return out


async def test_jobs_dying_in_the_same_instant_are_each_seen_once(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    for jid in ("a", "b", "c"):
        die(clean_redis, jid, 100.5)
    reader = source(clients[0], clients[1])
    assert sorted(r.job_id for r in await take_all(reader)) == ["a", "b", "c"]
    die(clean_redis, "d", 100.5)  # one more at the very watermark score
    assert [r.job_id for r in await take_all(reader)] == ["d"]


async def test_a_restart_continues_where_the_fleet_stopped(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    for i in range(5):
        die(clean_redis, f"j{i}", 100 + i)
    first = source(clients[0], clients[1])
    for _ in range(3):
        record = await first.claim()
        assert record is not None and await first.ack(record.receipt)
    restarted = source(clients[2], clients[3])
    assert [r.job_id for r in await take_all(restarted)] == ["j3", "j4"]


async def test_concurrent_replicas_never_claim_the_same_job(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    for i in range(30):
        die(clean_redis, f"j{i:02}", 100 + i // 3)  # groups of three share a score
    replicas = [source(clients[0], clients[1]), source(clients[2], clients[3]), source(clients[4], clients[5])]
    results = await asyncio.gather(*(take_all(r) for r in replicas))
    seen = [record.job_id for result in results for record in result]
    assert sorted(seen) == [f"j{i:02}" for i in range(30)]


async def test_an_expired_lease_is_reclaimed_and_a_live_one_is_not(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    die(clean_redis, "a", 100)
    die(clean_redis, "b", 101)
    killed = source(clients[0], clients[1], now=NOW)
    held = await killed.claim()
    assert held is not None and held.job_id == "a"  # then killed -9: never acked
    peer = source(clients[2], clients[3], now=NOW + 1)
    record = await peer.claim()
    assert record is not None and record.job_id == "b"  # a is leased: skipped, not lost
    assert await peer.ack(record.receipt)
    assert await peer.claim() is None
    later = source(clients[2], clients[3], now=NOW + 31)
    record = await later.claim()
    assert record is not None and record.job_id == "a"
    assert await later.ack(record.receipt)
    assert await take_all(later) == []


async def test_the_producer_trimming_its_set_neither_replays_nor_loses(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    for i in range(6):
        die(clean_redis, f"j{i}", 100 + i)
    reader = source(clients[0], clients[1])
    assert await reader.claim() is not None  # j0 leased, never acked
    for _ in range(2):
        record = await reader.claim()
        assert record is not None and await reader.ack(record.receipt)  # j1, j2 finished
    clean_redis.zremrangebyrank("dead", 0, 3)  # Sidekiq's cap: the oldest four go (j0 … j3)
    for i in range(6, 8):
        die(clean_redis, f"j{i}", 100 + i)
    later = source(clients[2], clients[3], now=NOW + 31)  # j0's lease expired: its record is gone
    assert [r.job_id for r in await take_all(later)] == ["j4", "j5", "j6", "j7"]
    assert clean_redis.zcard(keys.cursor_leases("sk")) == 0  # the dead lease was dropped


async def test_cursor_keys_share_one_hash_slot(clients: list[aioredis.Redis]) -> None:
    names = [keys.cursor("sk"), keys.cursor_ids("sk"), keys.cursor_leases("sk"), keys.cursor_lease_scores("sk")]
    assert {name.split("{", 1)[1].split("}", 1)[0] for name in names} == {"sk"}
    cursor = Cursor(clients[0], "sk")
    assert await cursor.claim(Position("1", "x"), 0)
    await cursor.finish(Position("1", "x"))
    assert await cursor.watermark() == "1"


async def test_a_late_finish_below_the_watermark_does_not_move_it_back(clients: list[aioredis.Redis]) -> None:
    cursor = Cursor(clients[0], "sk")
    assert await cursor.claim(Position("5", "low"), 0)
    assert await cursor.claim(Position("9", "high"), 0)
    await cursor.finish(Position("9", "high"))
    await cursor.finish(Position("5", "low"))
    assert await cursor.watermark() == "9"
    assert not await cursor.claim(Position("5", "low"), 10**12)
    assert not await cursor.claim(Position("9", "high"), 10**12)
