"""Routing, and the final delivery of one item to one sink.

`routed(alert)` names the sinks an alert is handed off to (the drain's
hand-off); `deliver_one` / `deliver_group` are what a sink worker runs for
each queued alert or group notification (docs/design.md, section 5b). Nothing
sends directly: every alert goes through the hand-off and a sink queue. A sink
is final when it is delivered, a duplicate (ledger hit) or recorded as
undeliverable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import RedisError

from bridge.core.metrics import Metrics
from bridge.core.models import Alert, Notification
from bridge.delivery.resolve import Resolve
from bridge.delivery.send import Deliverer, ResolveSink, Result, Route
from bridge.stores.ledger import Ledger
from bridge.stores.undeliverable_records import Failure, UndeliverableStore, build_record

log = logging.getLogger(__name__)

__all__ = ["Dispatcher", "Route"]


class Dispatcher:
    """Sends one alert to its routed sinks concurrently."""

    def __init__(
        self,
        routes: Sequence[Route],
        deliverer: Deliverer,
        undeliverable: UndeliverableStore | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`deliverer` is required: it holds the ledger (or an explicit None), never a silent default."""
        self._routes = list(routes)
        self._metrics = metrics or Metrics()
        self._deliverer = deliverer
        self._undeliverable = undeliverable
        self._depth_known = False

    @property
    def routes(self) -> list[Route]:
        return list(self._routes)

    def routed(self, alert: Alert) -> list[Route]:
        queue, severity = alert.dead_letter.queue, alert.severity
        return [r for r in self._routes if r.settings.routes(queue, severity)]

    def ledger_for(self, route: Route) -> Ledger | None:
        """The ledger `route` delivers under (None: console sinks, or no ledger at all)."""
        return self._deliverer.ledger_for(route)

    def count_newer(self, route: Route) -> None:
        """A queued item of a newer record format, left for a replica that reads it."""
        self._metrics.newer_format_left.labels(route.sink.name).inc()

    def count_duplicate(self, route: Route) -> None:
        """A duplicate the queue's take found (already in the ledger), counted like any other."""
        self._count(route, Result(route.sink.name, "duplicate", 0), time.monotonic())

    async def deliver_one(
        self, route: Route, alert: Alert, *, token: str | None = None, mark_later: bool = False
    ) -> Result:
        """One alert to one sink until final; an undeliverable outcome is recorded.

        `token` / `mark_later`: see `Deliverer.deliver` (a sink worker's take with reservations).
        """
        await self._refresh_depth_once()
        started = time.monotonic()
        result = await self._deliverer.deliver(route, alert, token=token, mark_later=mark_later)
        if result.outcome == "undeliverable":
            await self._record(route, alert, result, lambda: route.sink.render(alert))
        self._count(route, result, started)
        return result

    async def deliver_group(self, route: Route, notification: Notification) -> Result:
        """One group notification to its sink until final; an undeliverable outcome is recorded."""
        started = time.monotonic()
        result = await self._deliverer.deliver_notification(route, notification)
        if result.outcome == "undeliverable":
            render = getattr(route.sink, "render_group", None)
            body = (lambda: render(notification)) if render else (lambda: route.sink.render(notification.first))
            extra = {"group_key": getattr(notification, "group_key", None), "count": getattr(notification, "count", 1)}
            await self._record(route, notification.first, result, body, extra)
        self._count(route, result, started)
        return result

    async def deliver_resolve(
        self, route: Route, sink: ResolveSink, resolve: Resolve, *, token: str | None = None
    ) -> Result:
        """One resolve to its sink until final; an undeliverable outcome is recorded."""
        started = time.monotonic()
        result = await self._deliverer.deliver_resolve(route, sink, resolve, token=token)
        if result.outcome == "undeliverable" and self._undeliverable is not None:
            record = {
                "sink": route.sink.name, "sink_type": route.settings.type, "status": result.status,
                "error": result.error or "", "idempotency_key": resolve.ledger_key_part,
                "attempts": result.attempts, "at": time.time(), "queue": resolve.queue,
                "raw_digest": resolve.digest, "body": resolve.model_dump(mode="json"),
            }
            await asyncio.shield(self._undeliverable.push(record))
        self._count(route, result, started)
        return result

    def _count(self, route: Route, result: Result, started: float) -> None:
        name = route.sink.name
        self._metrics.child(self._metrics.deliveries, name, result.outcome).inc()
        if result.outcome != "duplicate":
            self._metrics.child(self._metrics.delivery_seconds, name).observe(time.monotonic() - started)

    async def _record(
        self,
        route: Route,
        alert: Alert,
        result: Result,
        render: Callable[[], dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> None:
        if self._undeliverable is None:
            return
        failure = Failure(result.attempts, result.status, result.error or "")
        try:
            body = render()
        except Exception as exc:  # the record matters more than its body
            body = {"render_error": type(exc).__name__}
        record = build_record(route.sink.name, route.settings.type, alert, body, failure,
                              self._undeliverable.formats) | (extra or {})
        await asyncio.shield(self._undeliverable.push(record))

    async def _refresh_depth_once(self) -> None:
        """Show records left by earlier runs in the depth gauge (later LPUSHes keep it current)."""
        if self._depth_known or self._undeliverable is None:
            return
        try:
            await self._undeliverable.depth()
            self._depth_known = True
        except RedisError:
            log.debug("undeliverable depth not known yet (Redis unavailable)")

    async def aclose(self) -> None:
        return None
