"""Resolve items (`bridge.delivery.resolve`) through a real sink worker to a real local PagerDuty-like receiver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis

from bridge.core.models import Severity
from bridge.delivery.assembly import build_delivery, build_groupers
from bridge.delivery.resolve import enqueue_resolve, parse_resolve
from bridge.delivery.supervisor import DeliverySupervisor
from bridge.settings import Settings
from bridge.sinks.pagerduty import dedup_key
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.undeliverable_records import UndeliverableStore
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, make_alert, open_delivery

KEY = "R0UTINGKEY0123456789abcdef012345"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "lease_s": 5}


def pd(url: str, **extra: object) -> dict[str, object]:
    return {"name": "pd", "type": "pagerduty", "routing_key": KEY, "events_url": url,
            "events_per_minute": 6000, "group_by": "none", **extra}


@asynccontextmanager
async def running(settings: Settings, client: aioredis.Redis) -> AsyncIterator[DeliverySupervisor]:
    """The sink workers exactly as the runtime builds them, running until the block ends."""
    async with open_delivery(settings, client) as built:
        groupers = build_groupers(client, built.dispatcher, built.metrics, lease_s=5)
        undeliverable = UndeliverableStore(client, built.metrics)
        delivery = build_delivery(settings, client, built.dispatcher, built.metrics, built.health,
                                  undeliverable, groupers)
        stop = asyncio.Event()
        task = asyncio.create_task(delivery.run(stop))
        try:
            yield delivery
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)


def events(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.requests if r.status == 202]


async def until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not check():
            await asyncio.sleep(0.02)


async def drained(client: aioredis.Redis, sink: str) -> None:
    async with asyncio.timeout(10):
        while (await SinkQueue(client, sink).stats()).depth:
            await asyncio.sleep(0.02)


async def test_a_resolve_is_sent_once_with_the_triggers_dedup_key_however_often_it_is_enqueued(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    receiver = Receiver(default=Reply(202, body='{"status":"success"}'))
    async with serve(receiver.app) as base:
        settings = make_settings(sinks=[pd(f"{base}/v2/enqueue")], delivery=FAST)
        alert = make_alert(job_id="j" * 300)  # a long id: the trigger's dedup_key is its sha256 form
        trigger_key = dedup_key(alert.dead_letter.job_id)
        for _ in range(2):  # e.g. two replicas noticing the same departure, or a repeat after kill -9
            await enqueue_resolve(aredis, "pd", trigger_key, idempotency_key=alert.idempotency_key,
                                  digest=alert.dead_letter.raw_digest, reason="retried")
        async with running(settings, aredis):
            await until(lambda: len(events(receiver)) >= 1)
            await drained(aredis, "pd")
            await asyncio.sleep(0.3)
    [event] = events(receiver)
    assert event == {"routing_key": KEY, "event_action": "resolve", "dedup_key": trigger_key, "client": "dlq-bridge"}


async def test_a_resolve_waits_out_429_and_503_with_retry_after(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    script = [Reply(429, {"Retry-After": "1"}), Reply(503)]
    receiver = Receiver(script, default=Reply(202))
    async with serve(receiver.app) as base:
        settings = make_settings(sinks=[pd(f"{base}/v2/enqueue")], delivery=FAST)
        await enqueue_resolve(aredis, "pd", "job-9", idempotency_key="orders:job-9", digest="d" * 16)
        async with running(settings, aredis):
            await until(lambda: len(events(receiver)) >= 1)
    statuses = [r.status for r in receiver.requests]
    assert statuses == [429, 503, 202]
    assert receiver.requests[1].at - receiver.requests[0].at >= 0.9, "Retry-After is honoured"


async def test_resolve_on_retry_off_and_other_sink_types_drop_the_item(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    receiver = Receiver(default=Reply(202))
    async with serve(receiver.app) as base:
        sinks = [pd(f"{base}/v2/enqueue", resolve_on_retry=False),
                 {"name": "hook", "type": "webhook", "url": f"{base}/hook", "secret": "s3", "group_by": "none"}]
        settings = make_settings(sinks=sinks, delivery=FAST)
        for sink in ("pd", "hook"):
            await enqueue_resolve(aredis, sink, "job-1", idempotency_key="orders:job-1", digest="d" * 16)
        async with running(settings, aredis):
            await drained(aredis, "pd")
            await drained(aredis, "hook")
            await asyncio.sleep(0.3)
    assert receiver.requests == [], "nothing is sent, and the items are acknowledged"


async def test_a_grouped_sink_resolves_a_group_of_that_one_job_only(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    receiver = Receiver(default=Reply(202))
    async with serve(receiver.app) as base:
        settings = make_settings(sinks=[pd(f"{base}/v2/enqueue", group_by="fingerprint", group_wait_s=0)],
                                 delivery=FAST)
        alone = make_alert(job_id="alone", fingerprint="f" * 16)
        crowd = [make_alert(job_id=f"crowd-{i}", fingerprint="c" * 16) for i in range(2)]
        queue = SinkQueue(aredis, "pd")
        async with running(settings, aredis):
            for alert in [alone, *crowd]:
                ident = f"1:{1000 + len(receiver.requests)}:{alert.idempotency_key}:{alert.dead_letter.raw_digest}"
                await queue.put(ident, alert.model_dump_json())
            await until(lambda: len(events(receiver)) >= 2)  # the two groups' triggers
            for alert in [alone, crowd[0]]:
                dl = alert.dead_letter
                await enqueue_resolve(aredis, "pd", dedup_key(dl.job_id), idempotency_key=dl.idempotency_key,
                                      digest=dl.raw_digest, fingerprint=dl.fingerprint, queue=dl.queue,
                                      severity=Severity.ERROR, reason="retried")
            await drained(aredis, "pd")
            await asyncio.sleep(0.3)
    resolves = [e for e in events(receiver) if e["event_action"] == "resolve"]
    assert resolves == [{"routing_key": KEY, "event_action": "resolve", "dedup_key": "alone", "client": "dlq-bridge"}]


def test_an_alert_body_is_never_taken_for_a_resolve() -> None:
    alert = make_alert(job_id='{"type":"dlq.resolve"}', last_error='{"type":"dlq.resolve","dedup_key":"x"}')
    assert parse_resolve(alert.model_dump_json()) is None
