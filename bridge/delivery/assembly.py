"""Builds the sinks named in settings, the dispatcher that routes to them, and their workers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

import httpx
import redis.asyncio as redis

from bridge.clients.replicas import ReplicaWait
from bridge.core.formats import RecordFormat
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.fleet import FleetFormat
from bridge.delivery.monitor import QueueMonitor
from bridge.delivery.orphans import warn_of_orphan_sink_queues
from bridge.delivery.send import Deliverer, Route
from bridge.delivery.sink_worker import Grouper, SinkWorker
from bridge.delivery.supervisor import DeliverySupervisor
from bridge.intake.redact import redact_key_name
from bridge.settings import Settings, SinkSettings
from bridge.sinks.sink_plugin import SinkContext
from bridge.sinks.sink_registry import SINKS
from bridge.stores.groups import Grouper as FleetGrouper
from bridge.stores.handoff import HandOff
from bridge.stores.ledger import Ledger
from bridge.stores.limits import Limiter, Limiters
from bridge.stores.silences import SilenceFilter, SilenceStore
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.undeliverable_records import UndeliverableStore
from bridge.telemetry.port import NO_TELEMETRY, Telemetry


def build_route(
    sink: SinkSettings,
    settings: Settings,
    http: httpx.AsyncClient,
    pacers: Limiters,
    stdout: TextIO | None = None,
) -> Route:
    """One configured sink, ready to deliver: built, paced and ledgered as its plug-in says."""
    plugin = SINKS.of(sink)
    ctx = SinkContext(http, settings.delivery.request_timeout_s, settings.redis.consumer_id, stdout)
    built = plugin.build(sink, ctx)
    pacer: Limiter | None = None
    if plugin.pace is not None:
        pace = plugin.pace(sink)
        pacer = pacers.get(sink.name, plugin.type, pace.key, pace.per_second)
    elif plugin.hold is not None:
        pacer = pacers.held(sink.name, plugin.type, plugin.hold(sink))
    return Route(sink, built, pacer, use_ledger=plugin.ledger)


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
    *,
    formats: RecordFormat | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
) -> Dispatcher:
    routes = build_routes(settings, http, stdout, client=client, metrics=metrics)
    for route in routes:
        health.set(f"sink:{route.sink.name}", Status.OK, "ready")
    ledger = build_ledger(settings, client)
    deliverer = Deliverer(settings.delivery, ledger, metrics, health, telemetry=telemetry)
    undeliverable = UndeliverableStore(client, metrics, settings.delivery.undeliverable_max, formats)
    return Dispatcher(routes, deliverer, undeliverable, metrics)


def sink_concurrency(settings: Settings, route: Route) -> int:
    """Paced sinks keep few in flight, so an urgent alert waits behind few."""
    return settings_concurrency(settings, route.settings)


def settings_concurrency(settings: Settings, sink: SinkSettings) -> int:
    """Deliveries in flight per replica for `sink`: few for a paced one (a held one is not paced)."""
    delivery = settings.delivery
    return delivery.paced_sink_concurrency if SINKS.of(sink).paced else delivery.sink_concurrency


def build_groupers(
    client: redis.Redis, dispatcher: Dispatcher, metrics: Metrics, lease_s: float = 120.0,
    formats: RecordFormat | None = None,
) -> dict[str, Grouper]:
    """A fleet-wide Grouper for every sink whose `group_by` is not "none" (docs/design.md, section 5b).

    `lease_s` is how long a claimed group stays its claimant's: the runtime passes
    `delivery.lease_s`, so a replica killed -9 holding a group frees it as soon
    as it frees its sink-queue items (a live sender renews it while retrying).
    """
    return {
        r.sink.name: FleetGrouper(client, r.settings, metrics=metrics, lease_s=lease_s, formats=formats)
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
    *,
    formats: RecordFormat | None = None,
    fleet: FleetFormat | None = None,
) -> DeliverySupervisor:
    """The hand-off, one worker per configured sink, and the queue monitor (docs/design.md, section 5b).

    `groupers` maps a grouped sink's name to its Grouper; a sink without one delivers per job.
    """
    lease = settings.delivery.lease_s
    formats = formats or RecordFormat()
    queues = {r.sink.name: SinkQueue(client, r.sink.name, lease, formats.reads) for r in dispatcher.routes}
    workers = {
        r.sink.name: SinkWorker(
            r, queues[r.sink.name], dispatcher, concurrency=sink_concurrency(settings, r), lease_s=lease,
            grouper=(groupers or {}).get(r.sink.name), undeliverable=undeliverable, formats=formats,
        )
        for r in dispatcher.routes
    }

    def nudge(sink: str) -> None:
        if sink in workers:
            workers[sink].nudge()

    notifies = {r.sink.name: SINKS.of(r.settings).notifies_people for r in dispatcher.routes}
    silences = SilenceFilter(SilenceStore(client), notifies)
    replicas = ReplicaWait(client, settings.redis.wait_replicas, settings.redis.wait_timeout_s, metrics)
    handoff = HandOff(
        client, settings.redis.consumer_id, settings.sources.archive_max, queues, nudge, replicas,
        silences=silences, on_silenced=lambda sink: metrics.silenced.labels(sink).inc(),
        on_trimmed=lambda source, count: metrics.archive_trimmed.labels(redact_key_name(source)).inc(count),
        formats=formats,
    )
    monitor = QueueMonitor(list(queues.values()), metrics, health, settings.delivery.queue_stale_s)
    return DeliverySupervisor(list(workers.values()), handoff, monitor,
                              start_up_report=lambda: warn_of_orphan_sink_queues(client, set(workers)), fleet=fleet)
