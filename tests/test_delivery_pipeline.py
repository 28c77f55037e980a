"""The real pipeline delivering to every sink type at local receivers; health and metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.undeliverable_records import UndeliverableStore
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}


async def test_pipeline_delivers_to_each_routed_sink_and_reports(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    slack, pd, hook = Receiver(), Receiver(default=Reply(202)), Receiver(default=Reply(410))
    async with serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack", "type": "slack", "group_by": "none", "url": f"{s}/hook", "messages_per_second": 100},
            {"name": "pd", "type": "pagerduty", "group_by": "none", "routing_key": "rk",
             "events_url": f"{p}/v2/enqueue",
             "min_severity": "critical"},
            {"name": "api", "type": "webhook", "url": f"{h}/in", "secret": "x", "queues": ["orders*"]},
        ])
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
            health = runtime.health.snapshot()
            metrics = runtime.metrics.render().decode()
    assert sorted(json.loads(r.body)["text"].rsplit(" ", 1)[-1] for r in slack.requests) == ["m1)", "o1)"]
    assert pd.requests == [], "severity error is below the PagerDuty sink's minimum"
    assert [json.loads(r.body)["job_id"] for r in hook.requests] == ["o1"]
    assert health["sink:slack"]["status"] == "ok" and health["sink:pd"]["status"] == "ok"
    assert health["sink:api"] == {"status": "degraded", "detail": "undeliverable: HTTP 410"}
    assert 'dlq_bridge_deliveries_total{outcome="delivered",sink="slack"} 2.0' in metrics
    assert 'dlq_bridge_deliveries_total{outcome="undeliverable",sink="api"} 1.0' in metrics
    assert 'dlq_bridge_delivery_attempts_total{outcome="permanent",sink="api"} 1.0' in metrics
    assert "dlq_bridge_undeliverable_depth 1.0" in metrics
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 1, "an undeliverable sink still finishes the entry"
    assert await aredis.llen(keys.UNDELIVERABLE) == 1


async def test_a_sink_broken_through_a_storm_keeps_only_the_newest_undeliverable_records(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """`undeliverable_max` bounds the records a dead sink leaves; every entry is still archived."""
    hook = Receiver(default=Reply(410))
    async with serve(hook.app) as h:
        settings = make_settings(delivery={**FAST, "undeliverable_max": 3, "sink_concurrency": 1}, sinks=[
            {"name": "api", "type": "webhook", "url": f"{h}/in", "secret": "x"},
        ])
        for i in range(8):
            await aredis.lpush("dead_letter:orders", envelope_entry(job_id=f"o{i}"))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
            metrics = runtime.metrics.render().decode()
    assert len(hook.requests) == 8, "every job was tried"
    records = [json.loads(raw) for raw in await aredis.lrange(keys.UNDELIVERABLE, 0, -1)]
    delivered_last = [json.loads(r.body)["job_id"] for r in hook.requests][-3:]
    assert [r["job_id"] for r in records] == delivered_last[::-1], "the newest 3 records are kept, newest first"
    assert "dlq_bridge_undeliverable_trimmed_total 5.0" in metrics
    assert "dlq_bridge_undeliverable_depth 3.0" in metrics
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 8, "trimming drops records, never entries"
    trims_logged = [r.getMessage() for r in caplog.records if "oldest record(s) trimmed" in r.getMessage()]
    assert trims_logged == ["dlq_bridge:undeliverable is at delivery.undeliverable_max (3): 1 oldest record(s) "
                            "trimmed"], "logged once a minute, not once per trimmed record"


async def test_the_undeliverable_list_grows_without_a_cap_when_none_is_given(aredis: aioredis.Redis) -> None:
    store = UndeliverableStore(aredis)
    for i in range(5):
        await store.push({"sink": "api", "job_id": f"j{i}"})
    assert [s.record["job_id"] for s in await store.records()] == ["j4", "j3", "j2", "j1", "j0"]


async def test_burst_mode_sends_each_cause_s_group_before_it_ends(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """`demo`/burst mode does not exit with digests still waiting out their `group_wait`."""
    slack, pd = Receiver(), Receiver(default=Reply(202))
    async with serve(slack.app) as s, serve(pd.app) as p:
        grouped = {"group_by": "fingerprint", "group_wait_s": 600, "group_interval_s": 600}
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack", "type": "slack", "url": f"{s}/hook", "messages_per_second": 100, **grouped},
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue", **grouped},
        ])
        timeouts = [envelope_entry(job_id=f"t{i}") for i in range(6)]
        refused = [envelope_entry(job_id=f"r{i}", last_error="ConnectionRefusedError: db:5432") for i in range(4)]
        await aredis.lpush("dead_letter:orders", *timeouts, *refused)
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)
            metrics = runtime.metrics.render().decode()
    counts = sorted(json.loads(r.body)["payload"]["custom_details"]["count"] for r in pd.requests)
    assert counts == [4, 6], "one page per cause, each counting all of its jobs"
    assert len(slack.requests) == 2, "one digest card per cause"
    texts = " ".join(json.loads(r.body)["text"] for r in slack.requests)
    assert "6 jobs failed with the same cause" in texts and "4 jobs failed with the same cause" in texts
    assert 'dlq_bridge_notifications_total{kind="digest",sink="slack"} 2.0' in metrics


async def test_burst_mode_ends_when_a_group_s_sink_is_down_and_keeps_the_group(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """A failed group notification is not retried until burst mode gives up: it waits for a later run."""
    slack = Receiver(default=Reply(404))
    async with serve(slack.app) as s:
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack", "type": "slack", "url": f"{s}/hook", "group_by": "fingerprint", "group_wait_s": 600},
        ])
        await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=f"t{i}") for i in range(3)])
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)
    assert len(slack.requests) == 1, "tried once, not in a loop"
    assert await aredis.zcard(keys.groups_due("slack")) == 1, "the group stays open for the next run"
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 3
