"""The hand-off (archive + queue for every routed sink, one step) and the sink workers, on real Redis."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from bridge.core.claimed import Claimed
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.handoff import HandOff
from bridge.stores.sink_queue import SinkQueue
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.receiver import Receiver, make_alert

SOURCE = "dead_letter:orders"


async def claimed_entry(client: aioredis.Redis, job_id: str = "j1") -> Claimed:
    raw = envelope_entry(job_id=job_id)
    await client.lpush(keys.processing(SOURCE, "test-1"), raw)
    return Claimed(SOURCE, raw)


def handoff_for(client: aioredis.Redis, *sinks: str) -> HandOff:
    return HandOff(client, "test-1", 100, {s: SinkQueue(client, s) for s in sinks})


async def test_finish_archives_and_queues_the_alert_for_every_routed_sink(aredis: aioredis.Redis) -> None:
    claimed, alert = await claimed_entry(aredis), make_alert(job_id="j1")
    handoff = handoff_for(aredis, "slack", "hook", "pd")
    assert await handoff.finish(claimed, alert, ["slack", "hook"])
    assert await aredis.llen(keys.processing(SOURCE, "test-1")) == 0
    assert await aredis.lrange(keys.alerted(SOURCE), 0, -1) == [claimed.raw]
    await handoff.flush()  # forwarded parcels leave the outbox in batches
    assert await aredis.hlen(keys.outbox(SOURCE)) == 0, "forwarded at once"
    for sink in ("slack", "hook"):
        [taken] = await SinkQueue(aredis, sink).take(5)
        assert json.loads(taken.body)["dead_letter"]["job_id"] == "j1"
    assert (await SinkQueue(aredis, "pd").stats()).depth == 0, "pd was not routed"
    assert not await handoff.finish(claimed, alert, ["slack", "hook"]), "no longer ours: nothing handed off twice"
    assert (await SinkQueue(aredis, "slack").stats()).depth == 1


async def test_concurrent_hand_offs_of_one_source_share_a_script_and_each_gets_its_own_answer(
    aredis: aioredis.Redis,
) -> None:
    """Batched: three hand-offs in the same few ms, one of an entry reaped meanwhile (not ours)."""
    handoff = handoff_for(aredis, "hook")
    assert await handoff.finish(await claimed_entry(aredis, "warm"), make_alert(job_id="warm"), [])  # script loaded
    a, b = await claimed_entry(aredis, "a"), await claimed_entry(aredis, "b")
    gone = Claimed(SOURCE, envelope_entry(job_id="gone"))
    before = (await aredis.info("commandstats")).get("cmdstat_evalsha", {}).get("calls", 0)
    done = await asyncio.gather(*(handoff.finish(c, make_alert(job_id=j), ["hook"])
                                  for c, j in ((a, "a"), (gone, "gone"), (b, "b"))))
    calls = (await aredis.info("commandstats"))["cmdstat_evalsha"]["calls"] - before
    assert done == [True, False, True]
    assert calls == 1, "one script call for the three"
    assert sorted(await aredis.lrange(keys.alerted(SOURCE), 0, 1)) == sorted([a.raw, b.raw])
    assert await aredis.llen(keys.processing(SOURCE, "test-1")) == 0
    assert await aredis.hlen(keys.entry_records(SOURCE)) == 3, "a record per finished entry (warm, a, b)"
    await handoff.flush()
    assert sorted(json.loads(t.body)["dead_letter"]["job_id"] for t in await SinkQueue(aredis, "hook").take(5)) == [
        "a", "b"]


async def test_a_reaped_entry_is_neither_archived_nor_queued(aredis: aioredis.Redis) -> None:
    claimed = Claimed(SOURCE, envelope_entry(job_id="gone"))
    assert not await handoff_for(aredis, "hook").finish(claimed, make_alert(job_id="gone"), ["hook"])
    assert await aredis.llen(keys.alerted(SOURCE)) == 0
    assert (await SinkQueue(aredis, "hook").stats()).depth == 0
    assert await aredis.hlen(keys.outbox(SOURCE)) == 0


async def test_a_crash_after_the_handoff_leaves_the_alert_in_the_outbox_and_the_sweep_forwards_it(
    aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    handoff = handoff_for(aredis, "hook", "slack")
    real_forward = HandOff._forward

    async def lost(*_args: Any) -> None:
        raise RedisConnectionError("injected: connection lost after the hand-off")

    monkeypatch.setattr(HandOff, "_forward", lost)
    assert await handoff.finish(await claimed_entry(aredis), make_alert(job_id="j1"), ["hook", "slack"])
    with pytest.raises(RedisConnectionError):
        await handoff.flush()  # the batched forward of this hand-off fails
    assert await aredis.llen(keys.alerted(SOURCE)) == 1
    assert await aredis.hlen(keys.outbox(SOURCE)) == 1, "the alert is durable in the outbox"
    assert (await SinkQueue(aredis, "hook").stats()).depth == 0
    monkeypatch.setattr(HandOff, "_forward", real_forward)
    assert await handoff.sweep(older_than_s=60) == 0, "too young: a live replica may be forwarding it"
    assert await handoff.sweep(older_than_s=0) == 1
    assert await aredis.hlen(keys.outbox(SOURCE)) == 0
    assert [(await SinkQueue(aredis, s).stats()).depth for s in ("hook", "slack")] == [1, 1]
    assert await handoff.sweep(older_than_s=0) == 0


async def test_forwarding_twice_queues_each_alert_once(aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forwarded, then the process dies before its outbox cleanup: another replica's sweep repeats it."""

    async def died(self: HandOff) -> None:
        pending, self._to_forward = self._to_forward, []
        await self._forward(pending)  # forwarded; the process dies before its outbox cleanup

    with monkeypatch.context() as patch:
        patch.setattr(HandOff, "_flush_soon", died)
        dying = handoff_for(aredis, "hook")
        assert await dying.finish(await claimed_entry(aredis), make_alert(job_id="j1"), ["hook"])
        assert dying._flusher is not None
        await dying._flusher
    assert await aredis.hlen(keys.outbox(SOURCE)) == 1 and (await SinkQueue(aredis, "hook").stats()).depth == 1
    other = handoff_for(aredis, "hook")
    assert await other.sweep(older_than_s=0) == 1
    assert await aredis.hlen(keys.outbox(SOURCE)) == 0
    [taken] = await SinkQueue(aredis, "hook").take(5)
    assert await other.sweep(older_than_s=0) == 0
    await aredis.hset(keys.outbox(SOURCE), "late", json.dumps(
        {"id": taken.id, "ms": 0, "sinks": ["hook"], "alert": taken.body}))  # a repeat while it is leased
    assert await other.sweep(older_than_s=0) == 1
    assert await SinkQueue(aredis, "hook").take(5) == [], "a leased item is never taken twice"


def paced_settings(make_settings: Callable[..., Settings], slack: str, hook: str, **extra: Any) -> Settings:
    return make_settings(
        delivery={"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "paced_sink_concurrency": 1},
        sinks=[
            {"name": "slack", "type": "slack", "group_by": "none", "url": f"{slack}/hook", "messages_per_second": 2},
            {"name": "api", "type": "webhook", "url": f"{hook}/in", "secret": "s"},
        ],
        **extra,
    )


async def wait_for(predicate: Callable[[], Any], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.02)
    return False


async def test_the_drain_is_not_held_by_a_paced_sink(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    slack, hook = Receiver(), Receiver()
    count = 10
    await aredis.lpush(SOURCE, *[envelope_entry(job_id=f"d{i}") for i in range(count)])

    async def archived() -> bool:
        return int(await aredis.llen(keys.alerted(SOURCE))) == count

    async with serve(slack.app) as s, serve(hook.app) as h, open_runtime(paced_settings(make_settings, s, h)) as rt:
        stop = asyncio.Event()
        task = asyncio.create_task(rt.pipeline.run(stop))
        assert await wait_for(archived, 20)
        at_archive = len(slack.requests)
        assert await wait_for(lambda: _true(len(hook.requests) == count), 10)
        assert await wait_for(lambda: _true(len(slack.requests) == count), 30)
        stop.set()
        await asyncio.wait_for(task, 10)
    assert at_archive < count // 2, f"every entry was archived while Slack had only {at_archive} of {count}"
    gaps = slack.gaps()
    assert min(gaps) > 0.3, "Slack's own pace (2/s) is kept"
    assert sorted(json.loads(r.body)["job_id"] for r in hook.requests) == sorted(f"d{i}" for i in range(count))


async def _true(value: bool) -> bool:
    return value


async def test_a_critical_alert_overtakes_the_backlog_of_a_paced_sink(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    slack, hook = Receiver(), Receiver()
    await aredis.lpush("dead_letter:bulk", *[envelope_entry(queue="bulk", job_id=f"i{i}") for i in range(12)])
    async with serve(slack.app) as s, serve(hook.app) as h:
        settings = paced_settings(make_settings, s, h, severity={"payments*": "critical", "default": "info"})
        async with open_runtime(settings) as runtime:
            stop = asyncio.Event()
            task = asyncio.create_task(runtime.pipeline.run(stop))
            assert await wait_for(lambda: _true(len(slack.requests) >= 2), 20)
            await aredis.lpush("dead_letter:payments", envelope_entry(queue="payments", job_id="crit"))
            assert await wait_for(lambda: _true(len(slack.requests) == 13), 30)
            stop.set()
            await asyncio.wait_for(task, 10)
    order = [json.loads(r.body)["text"] for r in slack.requests]
    position = next(i for i, text in enumerate(order) if "crit" in text)
    assert position <= 4, f"the critical alert waited behind {position} info alerts: {order}"


async def test_burst_mode_returns_only_once_every_sink_queue_is_empty(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    slack, hook = Receiver(), Receiver()
    await aredis.lpush(SOURCE, *[envelope_entry(job_id=f"b{i}") for i in range(4)])
    async with serve(slack.app) as s, serve(hook.app) as h, open_runtime(paced_settings(make_settings, s, h)) as rt:
        await asyncio.wait_for(rt.pipeline.run(asyncio.Event(), burst=True), 30)
        metrics = rt.metrics.render().decode()
    assert len(slack.requests) == 4 and len(hook.requests) == 4
    assert 'dlq_bridge_sink_queue_depth{sink="slack"} 0.0' in metrics
