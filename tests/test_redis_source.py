"""The Redis list source against a real Redis: claim, finish, recovery, reaper, fairness."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from bridge.runtime import open_runtime
from bridge.settings import Settings, SourcesSettings
from bridge.sources.redis_list import RedisListSource
from bridge.stores import keys
from tests.conftest import envelope_entry


def source(client: aioredis.Redis, consumer: str = "c1", **overrides: object) -> RedisListSource:
    return RedisListSource(client, SourcesSettings(**overrides), consumer)  # type: ignore[arg-type]


async def test_claim_moves_oldest_into_processing_and_finish_archives(aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:orders", b"first", b"second")
    src = source(aredis)
    await src.rescan()
    claimed = await src.claim()
    assert claimed is not None and claimed.raw == b"first"
    assert await aredis.lrange(keys.processing("dead_letter:orders", "c1"), 0, -1) == [b"first"]
    assert await src.finish(claimed)
    assert await aredis.lrange(keys.alerted("dead_letter:orders"), 0, -1) == [b"first"]
    assert await aredis.llen(keys.processing("dead_letter:orders", "c1")) == 0
    assert await aredis.lrange("dead_letter:orders", 0, -1) == [b"second"]


async def test_archive_is_capped_newest_first(aredis: aioredis.Redis) -> None:
    src = source(aredis, archive_max=3)
    for i in range(5):
        await aredis.lpush("dead_letter:q", f"e{i}".encode())
    await src.rescan()
    while (claimed := await src.claim()) is not None:
        await src.finish(claimed)
    assert await aredis.lrange(keys.alerted("dead_letter:q"), 0, -1) == [b"e4", b"e3", b"e2"]


async def test_discovery_uses_the_pattern_and_skips_other_types(aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:a", b"x")
    await aredis.set("dead_letter:not-a-list", b"x")
    await aredis.lpush("work:a", b"x")
    assert await source(aredis).rescan() == ["dead_letter:a"]
    await aredis.lpush("dead_letter:b", b"x")
    assert await source(aredis).rescan() == ["dead_letter:a", "dead_letter:b"]


async def test_a_drained_dlq_stays_in_rotation(aredis: aioredis.Redis) -> None:
    """Redis deletes an empty list; its next dead letter must not wait for a rescan."""
    await aredis.lpush("dead_letter:sporadic", b"one")
    src = source(aredis)
    await src.rescan()
    first = await src.claim()
    assert first is not None and await src.finish(first)
    assert not await aredis.exists("dead_letter:sporadic")
    assert await src.rescan() == ["dead_letter:sporadic"]
    await aredis.lpush("dead_letter:sporadic", b"two")
    second = await src.claim()
    assert second is not None and second.raw == b"two"


async def test_recover_own_returns_entries_to_the_right_end_in_claim_order(aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:q", b"1", b"2", b"3", b"4")
    src = source(aredis)
    await src.rescan()
    first, second = await src.claim(), await src.claim()
    assert first is not None and second is not None and (first.raw, second.raw) == (b"1", b"2")
    assert await source(aredis).recover_own() == 2
    assert await aredis.lrange("dead_letter:q", 0, -1) == [b"4", b"3", b"2", b"1"]


async def test_reaper_returns_dead_and_never_seen_consumers_but_not_live_ones(aredis: aioredis.Redis) -> None:
    await aredis.lpush(keys.processing("dead_letter:q", "ghost-7"), b"orphan")
    await aredis.lpush(keys.processing("dead_letter:{carts}:eu", "never.seen_id"), b"cart")
    await aredis.lpush(keys.processing("dead_letter:q", "alive"), b"busy")
    await source(aredis, consumer="alive").heartbeat()
    assert await source(aredis, consumer="reaper").reap() == 2
    assert await aredis.lrange("dead_letter:q", 0, -1) == [b"orphan"]
    assert await aredis.lrange("dead_letter:{carts}:eu", 0, -1) == [b"cart"]
    assert await aredis.lrange(keys.processing("dead_letter:q", "alive"), 0, -1) == [b"busy"]


async def test_finish_of_a_reaped_entry_does_not_duplicate_it_in_the_archive(aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:q", b"e")
    src = source(aredis)
    await src.rescan()
    claimed = await src.claim()
    assert claimed is not None
    await source(aredis, consumer="reaper").reap()  # c1 has no heartbeat: reaped
    assert not await src.finish(claimed)
    assert await aredis.llen(keys.alerted("dead_letter:q")) == 0
    assert await aredis.lrange("dead_letter:q", 0, -1) == [b"e"]


async def test_one_busy_dlq_does_not_starve_the_others(aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:busy", *[f"b{i}".encode() for i in range(1000)])
    await aredis.lpush("dead_letter:quiet", b"q1", b"q2")
    src = source(aredis)
    await src.rescan()
    first_ten = [await src.claim() for _ in range(10)]
    quiet = [c for c in first_ten if c is not None and c.source_key == "dead_letter:quiet"]
    assert len(quiet) == 2


async def test_pipeline_drains_several_dlqs_and_reaps_a_dead_consumer(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    for q in ("a", "b", "c"):
        await aredis.lpush(f"dead_letter:{q}", *[envelope_entry(queue=q, job_id=f"{q}{i}") for i in range(30)])
    await aredis.lpush(keys.processing("dead_letter:a", "crashed-pod"), envelope_entry(queue="a", job_id="lost"))
    out = io.StringIO()
    settings = make_settings(sources={"concurrency": 8, "reap_interval_s": 0.1})
    async with open_runtime(settings, stdout=out) as runtime:
        stop = asyncio.Event()
        task = asyncio.create_task(runtime.pipeline.run(stop))
        for _ in range(600):  # archived at hand-off; the console sink prints from its own queue (30 s)
            archived = sum([await aredis.llen(keys.alerted(f"dead_letter:{q}")) for q in "abc"])
            if archived == 91 and out.getvalue().count("dlq-bridge alert") == 91:
                break
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 10)
    assert archived == 91
    assert out.getvalue().count("dlq-bridge alert") == 91
    assert "id=lost" in out.getvalue()
    assert [k async for k in aredis.scan_iter(match="dlq_bridge:processing:*")] in ([],)
    metrics = runtime.metrics.render().decode()
    assert 'dlq_bridge_entries_total{outcome="alerted"} 91.0' in metrics


async def test_a_claim_whose_reply_was_lost_is_returned_and_processed(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    """An entry in our own processing list that no worker holds (LMOVE reply lost), planted once
    start-up (which returns a previous run's list) is over: the periodic sweep returns it."""
    caplog.set_level(logging.INFO, logger="bridge.drain.pipeline")
    settings = make_settings(sources={"reap_interval_s": 0.2})
    out = io.StringIO()
    async with open_runtime(settings, stdout=out) as runtime:
        stop = asyncio.Event()
        before = runtime.pipeline.last_tick
        task = asyncio.create_task(runtime.pipeline.run(stop))
        while runtime.pipeline.last_tick == before:  # the first claim-loop tick comes after start-up
            assert not task.done()
            await asyncio.sleep(0.01)
        await aredis.lpush(keys.processing("dead_letter:lost", "test-1"), envelope_entry(job_id="orphan-claim"))
        for _ in range(600):  # 30 s at most: a loaded machine
            if await aredis.llen(keys.alerted("dead_letter:lost")) == 1 and "id=orphan-claim" in out.getvalue():
                break
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 10)
        reaped = runtime.metrics.render().decode()
    assert await aredis.llen(keys.alerted("dead_letter:lost")) == 1, "the orphan was returned and archived"
    assert "id=orphan-claim" in out.getvalue()
    messages = [r.getMessage() for r in caplog.records]
    assert "returned an orphaned claim to dead_letter:lost" in messages, "the sweep returned it"
    assert not any("from a previous run" in m for m in messages), "not the start-up recovery"
    reaped_total = re.search(r"^dlq_bridge_reaped_entries_total ([0-9.]+)$", reaped, re.M)
    assert reaped_total is not None and float(reaped_total.group(1)) >= 1, "the sweep counted it"


async def test_cancelling_the_pipeline_cancels_in_flight_deliveries_and_puts_them_back(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    """What the grace-period timeout does: nothing keeps running after the runtime closes.

    The entries were handed off (archived) before their deliveries started; the cancelled
    deliveries go back to the sink queue, ready for the next run (docs/design.md, section 5b).
    """
    from bridge.stores.sink_queue import SinkQueue
    from tests.support.http_server import serve
    from tests.support.receiver import Receiver, Reply

    hanging = Receiver(default=Reply(delay_s=3))
    await aredis.lpush("dead_letter:hang", *[envelope_entry(job_id=f"h{i}") for i in range(3)])
    async with serve(hanging.app) as base:
        settings = make_settings(sinks=[{"name": "hook", "type": "webhook", "url": f"{base}/x", "secret": "s"}])
        async with open_runtime(settings, stdout=io.StringIO()) as runtime:
            task = asyncio.create_task(runtime.pipeline.run(asyncio.Event()))
            while len(hanging.requests) < 3:
                await asyncio.sleep(0.02)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert not runtime.pipeline._in_flight
            assert not any(w.busy for w in runtime.delivery.workers.values())
        assert await aredis.llen(keys.processing("dead_letter:hang", "test-1")) == 0
        assert await aredis.llen(keys.alerted("dead_letter:hang")) == 3
        stats = await SinkQueue(aredis, "hook").stats()
        assert (stats.ready, stats.leased) == (3, 0), "cancelled deliveries are queued again, not leased"


async def test_metrics_show_dlq_and_undeliverable_depth_written_by_others(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    """The alerting rules read these gauges; another process may have written the records."""
    await aredis.lpush(keys.UNDELIVERABLE, b'{"sink": "x"}', b'{"sink": "y"}')
    await aredis.lpush("dead_letter:waiting", b"1", b"2", b"3")
    settings = make_settings(sources={"concurrency": 1})
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        await runtime.pipeline._rescan()
        text = runtime.metrics.render().decode()
    assert "dlq_bridge_undeliverable_depth 2.0" in text
    assert 'dlq_bridge_dlq_depth{source="dead_letter:waiting"} 3.0' in text
