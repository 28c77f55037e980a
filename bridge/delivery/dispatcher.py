"""Routes an alert to every matching sink and returns when each is final.

Each routed sink gets its own concurrent delivery loop (ledger, pacing,
retries), so a slow or dead sink never delays the others. A sink is final
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
from collections.abc import Sequence

from redis.exceptions import RedisError

from bridge.delivery.deliver import Deliverer, Result, Route
from bridge.delivery.undeliverable import Failure, UndeliverableStore, build_record
from bridge.metrics import Metrics
from bridge.models import Alert

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
            *(self._final(route, alert) for route in self.routed(alert)), return_exceptions=True
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

    async def _final(self, route: Route, alert: Alert) -> Result:
        started = time.monotonic()
        result = await self._deliverer.deliver(route, alert)
        if result.outcome == "undeliverable":
            await self._record(route, alert, result)
        name = route.sink.name
        self._metrics.deliveries.labels(name, result.outcome).inc()
        if result.outcome != "duplicate":
            self._metrics.delivery_seconds.labels(name).observe(time.monotonic() - started)
        return result

    async def _record(self, route: Route, alert: Alert, result: Result) -> None:
        if self._undeliverable is None:
            return
        failure = Failure(result.attempts, result.status, result.error or "")
        try:
            body = route.sink.render(alert)
        except Exception as exc:  # the record matters more than its body
            body = {"render_error": type(exc).__name__}
        record = build_record(route.sink.name, route.settings.type, alert, body, failure)
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
