"""Routing, and the final delivery of one item to one sink.

`routed(alert)` names the sinks an alert is handed off to (the pipeline's
hand-off); `deliver_one` / `deliver_group` are what a sink worker runs for
each queued alert or group notification (docs/design.md, section 5b).
`dispatch(alert)` delivers to every routed sink directly and concurrently;
the pipeline no longer uses it (tests and direct sends do). A sink is final
when it is delivered, a duplicate (ledger hit) or recorded as undeliverable.

Redis errors: `dispatch()` raises `RedisError` only when an outcome could not
be recorded (ledger read/mark or undeliverable LPUSH failed). The other sinks
still finish first. The pipeline then keeps the entry and retries it whole;
the ledger suppresses the sinks that already succeeded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import RedisError

from bridge.delivery.deliver import Deliverer, ResolveSink, Result, Route
from bridge.delivery.resolve import Resolve
from bridge.delivery.undeliverable import Failure, UndeliverableStore, build_record
from bridge.metrics import Metrics
from bridge.models import Alert, Notification

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

    async def dispatch(self, alert: Alert) -> list[Result]:
        """Deliver to every routed sink; returns when each is final (see module doc)."""
        await self._refresh_depth_once()
        outcomes = await asyncio.gather(
            *(self.deliver_one(route, alert) for route in self.routed(alert)), return_exceptions=True
        )
        results, redis_errors = [], []
        for outcome in outcomes:
            if isinstance(outcome, (RedisError, OSError)):
                redis_errors.append(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome  # cancellation or a bug in this module
            else:
                results.append(outcome)
        if redis_errors:
            raise redis_errors[0]
        return results

    async def deliver_one(self, route: Route, alert: Alert) -> Result:
        """One alert to one sink until final; an undeliverable outcome is recorded."""
        await self._refresh_depth_once()
        started = time.monotonic()
        result = await self._deliverer.deliver(route, alert)
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

    async def deliver_resolve(self, route: Route, sink: ResolveSink, resolve: Resolve) -> Result:
        """One resolve to its sink until final; an undeliverable outcome is recorded."""
        started = time.monotonic()
        result = await self._deliverer.deliver_resolve(route, sink, resolve)
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
        self._metrics.deliveries.labels(name, result.outcome).inc()
        if result.outcome != "duplicate":
            self._metrics.delivery_seconds.labels(name).observe(time.monotonic() - started)

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
        record = build_record(route.sink.name, route.settings.type, alert, body, failure) | (extra or {})
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
