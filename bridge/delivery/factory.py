"""Builds the sinks named in settings, the dispatcher that routes to them, and their workers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

import httpx
import redis.asyncio as redis

from bridge.delivery.deliver import Deliverer, Route
from bridge.delivery.dispatcher import Dispatcher
from bridge.delivery.grouping import Grouper as FleetGrouper
from bridge.delivery.ledger import Ledger
from bridge.delivery.limiter import Limiters
from bridge.delivery.monitor import QueueMonitor
from bridge.delivery.orphans import warn_of_orphan_sink_queues
from bridge.delivery.queue import SinkQueue
from bridge.delivery.undeliverable import UndeliverableStore
from bridge.delivery.worker import Delivery, Grouper, SinkWorker
from bridge.handoff import HandOff
from bridge.health import Health, Status
from bridge.metrics import Metrics
from bridge.replicas import ReplicaWait
from bridge.settings import (
    ConsoleSinkSettings,
    PagerDutySinkSettings,
    Settings,
    SinkSettings,
    SlackSinkSettings,
    WebhookSinkSettings,
)
from bridge.silences import SilenceFilter, SilenceStore
from bridge.sinks.console import ConsoleSink
from bridge.sinks.pagerduty import PagerDutySink
from bridge.sinks.slack import SlackSink
from bridge.sinks.webhook import WebhookSink


def build_route(
    sink: SinkSettings,
    settings: Settings,
    http: httpx.AsyncClient,
    pacers: Limiters,
    stdout: TextIO | None = None,
) -> Route:
    """One configured sink, ready to deliver (console sinks skip the ledger)."""
    timeout = settings.delivery.request_timeout_s
    if isinstance(sink, SlackSinkSettings):
        assert sink.url is not None
        url = sink.url.get_secret_value()
        pacer = pacers.get(sink.name, "slack", url, sink.messages_per_second)
        return Route(sink, SlackSink(sink.name, sink.url, http, timeout), pacer)
    if isinstance(sink, PagerDutySinkSettings):
        assert sink.routing_key is not None
        key = sink.routing_key.get_secret_value()
        pacer = pacers.get(sink.name, "pagerduty", key, sink.events_per_minute / 60.0)
        source = sink.source or settings.redis.consumer_id
        pd = PagerDutySink(sink.name, sink.routing_key, sink.events_url, source, http, timeout)
        return Route(sink, pd, pacer)
    if isinstance(sink, WebhookSinkSettings):
        assert sink.url is not None
        hook = WebhookSink(sink.name, sink.url, sink.signing_secrets(), http, timeout)
        return Route(sink, hook, pacers.held(sink.name, "webhook", sink.url))
    assert isinstance(sink, ConsoleSinkSettings)
    return Route(sink, ConsoleSink(sink.name, stdout, sink.color), use_ledger=False)


def build_routes(
    settings: Settings,
    http: httpx.AsyncClient,
    stdout: TextIO | None = None,
    *,
    client: redis.Redis | None = None,
    metrics: Metrics | None = None,
) -> list[Route]:
    """Every configured sink; paced fleet-wide through `client` (in process without one)."""
    pacers = Limiters(client, settings.delivery.max_retry_after_s, metrics)
    return [build_route(s, settings, http, pacers, stdout) for s in settings.effective_sinks()]


def build_ledger(settings: Settings, client: redis.Redis, owner: str | None = None) -> Ledger:
    """The ledger; `owner` (default: this replica's consumer id) names its reservations."""
    delivery = settings.delivery
    return Ledger(client, delivery.ledger_ttl_s, reservation_ttl_s=delivery.reservation_ttl_s,
                  owner=owner or settings.redis.consumer_id)


def build_dispatcher(
    settings: Settings,
    client: redis.Redis,
    http: httpx.AsyncClient,
    metrics: Metrics,
    health: Health,
    stdout: TextIO | None = None,
) -> Dispatcher:
    routes = build_routes(settings, http, stdout, client=client, metrics=metrics)
    for route in routes:
        health.set(f"sink:{route.sink.name}", Status.OK, "ready")
    ledger = build_ledger(settings, client)
    deliverer = Deliverer(settings.delivery, ledger, metrics, health)
    undeliverable = UndeliverableStore(client, metrics, settings.delivery.undeliverable_max)
    return Dispatcher(routes, deliverer, undeliverable, metrics)


def sink_concurrency(settings: Settings, route: Route) -> int:
    """Paced sinks (slack, pagerduty) keep few in flight, so an urgent alert waits behind few."""
    delivery = settings.delivery
    paced = route.settings.type in ("slack", "pagerduty")  # a webhook's pacer only holds after a 429
    return delivery.paced_sink_concurrency if paced else delivery.sink_concurrency


def build_groupers(
    client: redis.Redis, dispatcher: Dispatcher, metrics: Metrics, lease_s: float = 120.0
) -> dict[str, Grouper]:
    """A fleet-wide Grouper for every sink whose `group_by` is not "none" (docs/design.md, section 5b).

    `lease_s` is how long a claimed group stays its claimant's: the runtime passes
    `delivery.lease_s`, so a replica killed -9 holding a group frees it as soon
    as it frees its sink-queue items (a live sender renews it while retrying).
    """
    return {
        r.sink.name: FleetGrouper(client, r.settings, metrics=metrics, lease_s=lease_s)
        for r in dispatcher.routes
        if r.settings.group_by != "none"
    }


def build_delivery(
    settings: Settings,
    client: redis.Redis,
    dispatcher: Dispatcher,
    metrics: Metrics,
    health: Health,
    undeliverable: UndeliverableStore,
    groupers: Mapping[str, Grouper] | None = None,
) -> Delivery:
    """The hand-off, one worker per configured sink, and the queue monitor (docs/design.md, section 5b).

    `groupers` maps a grouped sink's name to its Grouper; a sink without one delivers per job.
    """
    lease = settings.delivery.lease_s
    queues = {r.sink.name: SinkQueue(client, r.sink.name, lease) for r in dispatcher.routes}
    workers = {
        r.sink.name: SinkWorker(
            r, queues[r.sink.name], dispatcher, concurrency=sink_concurrency(settings, r), lease_s=lease,
            grouper=(groupers or {}).get(r.sink.name), undeliverable=undeliverable,
        )
        for r in dispatcher.routes
    }

    def nudge(sink: str) -> None:
        if sink in workers:
            workers[sink].nudge()

    types = {r.sink.name: r.settings.type for r in dispatcher.routes}
    silences = SilenceFilter(SilenceStore(client), types)
    replicas = ReplicaWait(client, settings.redis.wait_replicas, settings.redis.wait_timeout_s, metrics)
    handoff = HandOff(
        client, settings.redis.consumer_id, settings.sources.archive_max, queues, nudge, replicas,
        silences=silences, on_silenced=lambda sink: metrics.silenced.labels(sink).inc(),
    )
    monitor = QueueMonitor(list(queues.values()), metrics, health, settings.delivery.queue_stale_s)
    return Delivery(list(workers.values()), handoff, monitor,
                    start_up_report=lambda: warn_of_orphan_sink_queues(client, set(workers)))
