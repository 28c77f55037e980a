"""Held jobs leaving a watched store (bridge.sources.leaving), on real Redis: each kind's judge of a
retry or delete against a trim, once per departure across replicas, a crash after the departure
step, and the bound on what is held. The real producers drive the same in tests/kinds/test_leaving_service.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from bridge.delivery.resolve import Resolve, parse_resolve
from bridge.sources.bullmq import BullMQJudge, bullmq_source
from bridge.sources.leaving import LeaveNote
from bridge.sources.rq import RQJudge
from bridge.sources.sidekiq import SidekiqJudge, sidekiq_source
from bridge.sources.watched import WatchedSource
from bridge.stores import keys
from bridge.stores.cursor import Cursor, Position
from bridge.stores.handoff import HandOff, Parcel
from bridge.stores.sink_queue import SinkQueue

NOW = 1_800_000_000.0
DAY = 24 * 3600.0


@pytest.fixture
async def clients(redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[list[aioredis.Redis]]:
    made = [aioredis.Redis.from_url(redis_url) for _ in range(4)]
    yield made
    for client in made:
        await client.aclose()


def die(client: redis.Redis, jid: str, at: float) -> None:
    """What Sidekiq's `DeadSet#kill` writes: the job JSON at the time of death."""
    job = {"class": "Hard", "queue": "default", "jid": jid, "error_class": "E", "error_message": "m", "failed_at": at}
    client.zadd("dead", {json.dumps(job): at})


def note(job_id: str) -> LeaveNote:
    resolve = Resolve(dedup_key=job_id, idempotency_key=f"sidekiq:default:{job_id}", digest="d" * 16, reason="retried")
    return LeaveNote(("pd",), resolve)


# --- judges ---------------------------------------------------------------------------------


async def test_sidekiq_tells_a_retry_from_its_trims(clean_redis: redis.Redis, aredis: aioredis.Redis) -> None:
    judge = SidekiqJudge(max_jobs=5, timeout_s=30 * DAY)
    for i, at in enumerate((NOW - 40 * DAY, NOW - 3, NOW - 2, NOW - 1)):
        die(clean_redis, f"j{i}", at)
    old, young = Position(repr(NOW - 50 * DAY), "gone-old"), Position(repr(NOW - 1.5), "gone-young")
    assert await judge.why_gone(aredis, "dead", young, NOW) == "retried", "an older job is still dead"
    clean_redis.zremrangebyrank("dead", 0, 2)  # only j3 is left, the newest
    assert await judge.why_gone(aredis, "dead", young, NOW) == "retried", "young, and the set is not full"
    assert await judge.why_gone(aredis, "dead", old, NOW) is None, "past dead_timeout: may be the age trim"
    for i in range(3):
        die(clean_redis, f"k{i}", NOW + i)  # 4 jobs = dead_max_jobs - 1: what a count trim leaves
    assert await judge.why_gone(aredis, "dead", young, NOW) is None, "a full set: may be the count trim"


async def test_bullmq_a_kept_hash_is_a_retry_and_a_lost_one_a_delete_only_above_an_older_job(
    clean_redis: redis.Redis, aredis: aioredis.Redis
) -> None:
    judge = BullMQJudge("bull", "q")
    clean_redis.zadd("bull:q:failed", {"5": 100, "7": 200})
    clean_redis.hset("bull:q:9", "name", "retried-job")
    assert await judge.why_gone(aredis, "bull:q:failed", Position("300", "9"), NOW) == "retried"
    assert await judge.why_gone(aredis, "bull:q:failed", Position("300", "8"), NOW) == "deleted"
    assert await judge.why_gone(aredis, "bull:q:failed", Position("100", "6"), NOW) == "deleted", (
        "same score, ranked after a job still there (BullMQ's jobs often fail in the same ms)"
    )
    assert await judge.why_gone(aredis, "bull:q:failed", Position("100", "4"), NOW) is None, "the oldest: a trim?"
    assert await judge.why_gone(aredis, "bull:q:failed", Position("50", "3"), NOW) is None


async def test_rq_an_entry_gone_before_its_expiry_was_taken_by_hand(
    clean_redis: redis.Redis, aredis: aioredis.Redis
) -> None:
    judge = RQJudge()
    clean_redis.hset("rq:job:kept", "status", "queued")
    assert await judge.why_gone(aredis, "rq:failed:q", Position(repr(NOW - 10), "kept"), NOW) is None, "expired"
    assert await judge.why_gone(aredis, "rq:failed:q", Position(repr(NOW + 30), "kept"), NOW) is None, "about to"
    assert await judge.why_gone(aredis, "rq:failed:q", Position(repr(NOW + DAY), "kept"), NOW) == "retried"
    assert await judge.why_gone(aredis, "rq:failed:q", Position(repr(NOW + DAY), "gone"), NOW) == "deleted"
    assert await judge.why_gone(aredis, "rq:failed:q", Position("-1", "gone"), NOW) == "deleted", "ttl -1: never"


# --- the departure step ---------------------------------------------------------------------


def sidekiq(store: aioredis.Redis, bridge: aioredis.Redis) -> WatchedSource:
    return sidekiq_source("sk", store, bridge, clock=lambda: NOW, dead_max_jobs=100)


async def hold_all(source: WatchedSource) -> None:
    while (record := await source.claim()) is not None:
        assert await source.ack_held(record.receipt, note(record.job_id))


async def test_each_departure_is_taken_once_by_concurrent_replicas(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    for i in range(20):
        die(clean_redis, f"j{i:02}", NOW - 100 + i)
    await hold_all(sidekiq(clients[0], clients[1]))
    assert clean_redis.zcard(keys.cursor_held("sk")) == 20
    for member in clean_redis.zrange("dead", 5, 14):
        clean_redis.zrem("dead", member)  # ten jobs retried from Sidekiq Web
    forwarded: list[Parcel] = []

    async def forward(_outbox: str, parcel: Parcel) -> None:
        forwarded.append(parcel)

    replicas = [sidekiq(clients[i], clients[i + 1]) for i in (0, 2, 0, 2)]
    for replica in replicas:
        await replica.rescan()
    counts = await asyncio.gather(*(r.check_leaving(forward) for r in replicas))
    assert sum(c.total() for c in counts) == 10
    resolves = [parse_resolve(p.alert) for p in forwarded]
    assert sorted(r.dedup_key for r in resolves if r) == [f"j{i:02}" for i in range(5, 15)]
    assert clean_redis.zcard(keys.cursor_held("sk")) == 10, "the others are still held"


async def test_a_crash_right_after_the_departure_step_still_delivers_the_resolve_once(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    die(clean_redis, "a", NOW - 10)
    die(clean_redis, "b", NOW - 5)
    source = sidekiq(clients[0], clients[1])
    await hold_all(source)
    clean_redis.zremrangebyrank("dead", 1, 1)  # b retried

    async def killed(_outbox: str, _parcel: Parcel) -> None:
        raise SystemExit("kill -9 between the departure script and the forward")

    with pytest.raises(SystemExit):
        await source.check_leaving(killed)
    assert clean_redis.hlen(keys.leave_outbox("sk")) == 1, "the resolve waits in the outbox"
    restarted = sidekiq(clients[2], clients[3])
    await restarted.rescan()
    handoff = HandOff(clients[2], "bridge-2", 100, {})
    assert await handoff.sweep(0.0) == 1  # what every replica's upkeep runs
    assert not await restarted.check_leaving(handoff.forward_parcel), "taken once: not queued again"
    assert await handoff.sweep(0.0) == 0
    [taken] = await SinkQueue(clients[2], "pd").take(10)
    resolve = parse_resolve(taken.body)
    assert resolve is not None and resolve.dedup_key == "b" and taken.id.split(":")[2] == "resolve"


async def test_a_job_that_died_again_is_held_at_its_new_death_not_resolved_for_the_old_one(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    die(clean_redis, "a", NOW - 10)
    source = sidekiq(clients[0], clients[1])
    await hold_all(source)
    clean_redis.zremrangebyrank("dead", 0, 0)
    die(clean_redis, "a", NOW - 1)  # retried and dead again before the next check
    await hold_all(source)  # the new death is alerted (and held at its score)
    forwarded: list[Parcel] = []

    async def forward(_outbox: str, parcel: Parcel) -> None:
        forwarded.append(parcel)

    assert not await source.check_leaving(forward)
    assert clean_redis.zscore(keys.cursor_held("sk"), "a") == NOW - 1


async def test_held_jobs_are_bounded_and_the_oldest_deaths_are_forgotten_first(aredis: aioredis.Redis) -> None:
    cursor = Cursor(aredis, "bounded")
    for i in range(10):
        position = Position(str(100 + i), f"j{i}")
        assert await cursor.claim(position, 0)
        await cursor.finish_and_hold(position, note(f"j{i}").encode(), max_held=4)
    assert await aredis.zrange(keys.cursor_held("bounded"), 0, -1) == [b"j6", b"j7", b"j8", b"j9"]
    assert sorted(await aredis.hkeys(keys.cursor_held_notes("bounded"))) == [b"j6", b"j7", b"j8", b"j9"]


async def test_a_check_walks_thousands_of_held_jobs_in_pages_and_finds_the_one_that_left(
    clean_redis: redis.Redis, clients: list[aioredis.Redis]
) -> None:
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(3000):
            pipe.zadd("bull:big:failed", {str(i): 1000 + i})
            pipe.hset(f"bull:big:{i}", "name", "n")
        pipe.execute()
    source = bullmq_source("bq", clients[0], clients[1], queues=["big"], clock=lambda: NOW)
    await source.rescan()
    cursor = Cursor(clients[1], "bq:big")
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(3000):
            pipe.zadd(keys.cursor_held("bq:big"), {str(i): 1000 + i})
            pipe.hset(keys.cursor_held_notes("bq:big"), str(i), note(str(i)).encode())
        pipe.execute()
    clean_redis.zrem("bull:big:failed", "1234")  # retried: its hash stays
    forwarded: list[Parcel] = []

    async def forward(_outbox: str, parcel: Parcel) -> None:
        forwarded.append(parcel)

    assert await source.check_leaving(forward) == {"retried": 1}
    assert [json.loads(p.alert)["dedup_key"] for p in forwarded] == ["1234"]
    assert await cursor.held_note("1234") is None
