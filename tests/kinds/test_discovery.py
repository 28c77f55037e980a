"""Watched sources with `queues = []` pick up queues that appear later, on the next rescan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from bridge.sources.bullmq import bullmq_source
from bridge.sources.rq import rq_source
from bridge.sources.watched import WatchedSource
from tests.kinds import producers


@pytest.fixture
async def aclient(redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def queues_of(source: WatchedSource) -> list[str]:
    seen = []
    while (record := await source.claim()) is not None:
        assert await source.ack(record.receipt)
        seen.append(record.queue)
    return seen


async def test_a_new_bullmq_queue_is_found_on_rescan(redis_url: str, aclient: aioredis.Redis) -> None:
    if reason := producers.bullmq_missing():
        pytest.skip(reason)
    await asyncio.to_thread(producers.produce_bullmq, redis_url, "emails", 1, 1)
    source = bullmq_source("bullmq", aclient, aclient)
    assert await queues_of(source) == ["emails"]
    await asyncio.to_thread(producers.produce_bullmq, redis_url, "invoices", 2, 1)
    assert await source.rescan() == ["bull:emails:failed", "bull:invoices:failed"]
    assert await queues_of(source) == ["invoices", "invoices"]


async def test_a_new_rq_queue_is_found_on_rescan(redis_url: str, aclient: aioredis.Redis) -> None:
    if reason := producers.rq_missing():
        pytest.skip(reason)
    await asyncio.to_thread(producers.produce_rq, redis_url, "billing", 1)
    source = rq_source("rq", aclient, aclient)
    assert await queues_of(source) == ["billing"]
    await asyncio.to_thread(producers.produce_rq, redis_url, "reports", 1)
    await source.rescan()
    assert await queues_of(source) == ["reports"]


async def test_listed_queues_limit_what_is_watched(redis_url: str, aclient: aioredis.Redis) -> None:
    if reason := producers.rq_missing():
        pytest.skip(reason)
    await asyncio.to_thread(producers.produce_rq, redis_url, "billing", 1)
    await asyncio.to_thread(producers.produce_rq, redis_url, "reports", 1)
    source = rq_source("rq", aclient, aclient, queues=["reports"])
    assert await queues_of(source) == ["reports"]
