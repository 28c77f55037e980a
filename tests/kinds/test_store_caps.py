"""Job-system stores near their own caps show in the console's retention banner (docs/design.md, 6b).

A BullMQ failed set is trimmed by BullMQ itself to its jobs' `removeOnFail` count, a Sidekiq dead
set to `dead_max_jobs`: past the cap the oldest dead jobs vanish before anyone looked. Real
producers fill each set; the bridge reads the cap (BullMQ: from the newest failed job's options)
and the overview names the store, its size, the cap and the setting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.console.service import ConsoleService, KindRef
from bridge.settings import Settings
from bridge.sources.bullmq import bullmq_source, remove_on_fail
from bridge.sources.dramatiq_xq import dramatiq_source
from bridge.sources.sidekiq import sidekiq_source
from bridge.sources.watched import WatchedSource
from tests.kinds import producers


def test_remove_on_fail_is_read_in_each_of_its_forms() -> None:
    assert remove_on_fail(b'{"attempts":1,"removeOnFail":{"count":500}}') == 500
    assert remove_on_fail(b'{"removeOnFail":100}') == 100
    for kept_forever_or_by_age in (b'{"removeOnFail":false}', b'{"removeOnFail":true}', b'{"removeOnFail":{"age":60}}',
                                   b"{}", b"not json", None):
        assert remove_on_fail(kept_forever_or_by_age) is None


async def retention(make_settings: Callable[..., Settings], client: aioredis.Redis, kind: str,
                    source: WatchedSource) -> list[dict[str, Any]]:
    await source.rescan()
    service = ConsoleService(make_settings(), client, kinds=[KindRef(kind, source)])
    overview = await service.overview()
    return [note.model_dump() for note in overview.retention]


async def test_a_bullmq_failed_set_at_its_jobs_remove_on_fail_is_shown(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis
) -> None:
    missing = producers.bullmq_missing()
    if missing:
        pytest.skip(missing)
    source = bullmq_source("bq", aredis, aredis, prefix="bull", queues=["invoices"])
    await asyncio.to_thread(producers.bullmq_failed_set, redis_url, "invoices", "trim", "3", "4")
    assert await retention(make_settings, aredis, "bullmq", source) == [], "3 of 4 is under 90 %"

    await asyncio.to_thread(producers.bullmq_failed_set, redis_url, "invoices", "trim", "3", "4")
    [note] = await retention(make_settings, aredis, "bullmq", source)
    assert (note["count"], note["cap"]) == (4, 4), "BullMQ trimmed its failed set to removeOnFail's count"
    assert "bull:invoices:failed" in note["store"] and "removeOnFail" in note["setting"]


async def test_a_sidekiq_dead_set_at_dead_max_jobs_is_shown(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis
) -> None:
    missing = producers.sidekiq_missing()
    if missing:
        pytest.skip(missing)
    source = sidekiq_source("sk", aredis, aredis, dead_max_jobs=3)
    await asyncio.to_thread(producers.produce_sidekiq, redis_url, 3)
    [note] = await retention(make_settings, aredis, "sidekiq", source)
    assert (note["count"], note["cap"]) == (3, 3)
    assert note["store"].startswith("sidekiq set dead") and "dead_max_jobs" in note["setting"]


async def test_a_dramatiq_dead_letter_queue_whose_oldest_nears_dead_message_ttl_is_shown(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis
) -> None:
    """Dramatiq drops dead messages by age only: the banner shows the oldest one's age against the TTL."""
    missing = producers.dramatiq_missing()
    if missing:
        pytest.skip(missing)
    source = dramatiq_source("dq", aredis, aredis, queues=["billing"], dead_message_ttl_s=3600)
    await asyncio.to_thread(producers.produce_dramatiq, redis_url, "billing", 1, age_s=1800)
    assert await retention(make_settings, aredis, "dramatiq", source) == [], "half its TTL old"

    await asyncio.to_thread(producers.produce_dramatiq, redis_url, "billing", 1, age_s=3400)
    [note] = await retention(make_settings, aredis, "dramatiq", source)
    assert note["unit"] == "seconds" and note["cap"] == 3600 and 3400 <= note["count"] < 3600
    assert "dramatiq:billing.XQ" in note["store"] and "dead_message_ttl" in note["setting"]
