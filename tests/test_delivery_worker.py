"""Sink workers against a grouped sink (a tiny Grouper to the section 5b interface), and the queue monitor."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from bridge.core.errors import SinkPermanent
from bridge.core.health import Health
from bridge.core.items import item_id, now_ms
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, Severity
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.monitor import QueueMonitor
from bridge.delivery.send import Deliverer, Route
from bridge.delivery.sink_worker import SinkWorker
from bridge.settings import ConsoleSinkSettings, DeliverySettings
from bridge.stores.ledger import Ledger
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.undeliverable_records import UndeliverableStore
from tests.support.receiver import make_alert, sample


@dataclass(frozen=True)
class Note:
    """The fields of `bridge.core.models.Notification` a worker and the deliverer use."""

    sink: str
    group_key: str
    sequence: int
    count: int
    first: Alert

    @property
    def ledger_key(self) -> str:
        return f"group:{self.group_key}:{self.sequence}"


@dataclass
class TinyGrouper:
    """Groups everything into one group; due once `size` members are in."""

    size: int
    members: list[str] = field(default_factory=list)
    first: Alert | None = None
    claimed: bool = False
    outcomes: list[tuple[int, bool]] = field(default_factory=list)

    async def add(self, alert: Alert) -> None:
        if alert.idempotency_key not in self.members:
            self.members.append(alert.idempotency_key)
            self.first = self.first or alert

    async def claim_due(self, limit: int) -> list[Note]:
        if self.claimed or len(self.members) < self.size or self.first is None or limit < 1:
            return []
        self.claimed = True
        return [Note("grp", "fp:abc", 1, len(self.members), self.first)]

    async def notified(self, notification: Any, delivered: bool) -> None:
        self.outcomes.append((notification.count, delivered))


class GroupSink:
    """A sink that records what it is sent (the real sinks gain send_group with grouping)."""

    def __init__(self, fail: bool = False) -> None:
        self.name = "grp"
        self.groups: list[Note] = []
        self.fail = fail

    def render(self, alert: Alert) -> dict[str, Any]:
        return {"job": alert.dead_letter.job_id}

    def render_group(self, n: Note) -> dict[str, Any]:
        return {"group": n.group_key, "count": n.count}

    async def send(self, alert: Alert) -> None:
        raise AssertionError("a grouped sink gets notifications, not single alerts")

    async def send_group(self, n: Note) -> None:
        if self.fail:
            raise SinkPermanent(self.name, "HTTP 400", status=400)
        self.groups.append(n)


def wiring(client: aioredis.Redis, sink: GroupSink) -> tuple[Route, Dispatcher, Metrics]:
    metrics, health = Metrics(), Health()
    route = Route(ConsoleSinkSettings(name="grp", type="console"), sink)  # type: ignore[arg-type]
    deliverer = Deliverer(DeliverySettings(max_attempts=1), Ledger(client, 3600), metrics, health)
    return route, Dispatcher([route], deliverer, UndeliverableStore(client, metrics), metrics), metrics


async def enqueue(queue: SinkQueue, alert: Alert) -> None:
    ident = item_id(alert.severity, now_ms(), alert.idempotency_key, alert.dead_letter.raw_digest)
    await queue.put(ident, alert.model_dump_json())


async def until(predicate: Any, timeout_s: float = 10) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_grouped_sink_acks_each_job_into_the_grouper_and_sends_one_notification(
    aredis: aioredis.Redis,
) -> None:
    sink, grouper = GroupSink(), TinyGrouper(size=3)
    route, dispatcher, metrics = wiring(aredis, sink)
    queue = SinkQueue(aredis, "grp")
    for i in range(3):
        await enqueue(queue, make_alert(job_id=f"g{i}"))
    worker = SinkWorker(route, queue, dispatcher, concurrency=4, lease_s=5, grouper=grouper)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    await until(lambda: grouper.outcomes)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert grouper.members == ["orders:g0", "orders:g1", "orders:g2"]
    assert [(n.group_key, n.count) for n in sink.groups] == [("fp:abc", 3)]
    assert grouper.outcomes == [(3, True)]
    assert (await queue.stats()).depth == 0, "every job was acked once it was in the grouper"
    assert sample(metrics, "dlq_bridge_deliveries_total", sink="grp", outcome="delivered") == 1
    again = await dispatcher.deliver_group(route, sink.groups[0])
    assert again.outcome == "duplicate", "the ledger knows the notification by its ledger key"


async def test_an_undeliverable_notification_is_recorded_with_its_group(aredis: aioredis.Redis) -> None:
    route, dispatcher, _ = wiring(aredis, GroupSink(fail=True))
    note = Note("grp", "fp:abc", 2, 7, make_alert(job_id="first"))
    result = await dispatcher.deliver_group(route, note)
    assert result.outcome == "undeliverable"
    [raw] = await aredis.lrange("dlq_bridge:undeliverable", 0, -1)
    record = json.loads(raw)
    assert (record["group_key"], record["count"], record["job_id"]) == ("fp:abc", 7, "first")
    assert record["body"] == {"group": "fp:abc", "count": 7}


async def test_the_monitor_shows_a_stale_sink_queue_as_degraded_and_sets_the_gauges(
    aredis: aioredis.Redis,
) -> None:
    metrics, health = Metrics(), Health()
    queue = SinkQueue(aredis, "slack")
    monitor = QueueMonitor([queue], metrics, health, stale_s=60)
    await queue.put(item_id(Severity.INFO, now_ms() - 30_000, "q:fresh", "d" * 16), "{}")
    await monitor.check()
    assert health.snapshot()["sink_queue:slack"] == {"status": "ok"}
    await queue.put(item_id(Severity.INFO, now_ms() - 600_000, "q:stale", "d" * 16), "{}")
    await monitor.check()
    check = health.snapshot()["sink_queue:slack"]
    assert check["status"] == "degraded" and "2 queued, oldest 600s old" in check["detail"]
    assert sample(metrics, "dlq_bridge_sink_queue_depth", sink="slack") == 2
    assert 599 <= sample(metrics, "dlq_bridge_sink_queue_oldest_age_seconds", sink="slack") <= 602
    for taken in await queue.take(5):
        await queue.ack(taken.id)
    await monitor.check()
    assert health.snapshot()["sink_queue:slack"] == {"status": "ok"}
    assert not health.failing(), "a lagging sink is degraded, never failing: the bridge still drains"


class StaggeredSink:
    """Answers after 0-4 ms, so deliveries finish while earlier acks are on their way."""

    def __init__(self) -> None:
        self.name = "staggered"
        self.sent: list[str] = []

    def render(self, alert: Alert) -> dict[str, Any]:
        return {"job": alert.dead_letter.job_id}

    async def send(self, alert: Alert) -> None:
        await asyncio.sleep(len(self.sent) % 5 / 1000)
        self.sent.append(alert.dead_letter.job_id)


async def test_every_item_is_acked_even_when_acks_arrive_during_a_flush(aredis: aioredis.Redis) -> None:
    """Many staggered deliveries: acks that come in while a batch is being acked are not left behind."""
    sink = StaggeredSink()
    route = Route(ConsoleSinkSettings(name="staggered", type="console"), sink, use_ledger=False)  # type: ignore[arg-type]
    metrics = Metrics()
    dispatcher = Dispatcher([route], Deliverer(DeliverySettings(), None, metrics, Health()), None, metrics)
    queue = SinkQueue(aredis, "staggered", lease_s=120)
    for i in range(300):
        await enqueue(queue, make_alert(job_id=f"c{i}"))
    worker = SinkWorker(route, queue, dispatcher, concurrency=16, lease_s=120)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(20):  # a forgotten ack would hold its item for the whole 120 s lease
            while len(sink.sent) < 300 or worker.busy or (await queue.stats()).depth:
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert sorted(sink.sent) == sorted(f"c{i}" for i in range(300))
