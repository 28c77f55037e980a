"""One alert to one sink: ledger reservation, paced attempts with retries, ledger mark.

Outcomes: `delivered` (a 2xx, now in the ledger), `duplicate` (the ledger
already had it, or another sender delivered it while this one waited on its
reservation), `undeliverable` (permanent error, attempts or deadline used up;
the reservation is released). Redis errors from the ledger propagate: the
caller cannot record the outcome, so the whole entry must be retried (the
ledger makes that safe). Pacing is fleet-wide (bridge.delivery.limiter).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tenacity import RetryCallState

from bridge import keys
from bridge.delivery.ledger import Ledger
from bridge.delivery.limiter import Limiter
from bridge.delivery.resolve import Resolve, ledger_key
from bridge.delivery.retry import retrying
from bridge.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.health import Health, Status
from bridge.metrics import Metrics
from bridge.models import Alert, Notification
from bridge.settings import DeliverySettings, SinkSettings
from bridge.sinks.base import Sink

log = logging.getLogger(__name__)

Outcome = Literal["delivered", "duplicate", "undeliverable"]
Send = Callable[[], Awaitable[None]]


class GroupSink(Protocol):
    async def send_group(self, notification: Notification) -> None: ...


@runtime_checkable
class ResolveSink(Protocol):
    async def send_resolve(self, resolve: Resolve) -> None: ...


@dataclass(frozen=True)
class Route:
    """A configured sink: its settings (routing), the sink, and optional fleet-wide pacing."""

    settings: SinkSettings
    sink: Sink
    pacer: Limiter | None = None
    use_ledger: bool = True


@dataclass(frozen=True)
class Result:
    sink: str
    outcome: Outcome
    attempts: int
    status: int | None = None
    error: str | None = None  # the SinkError's detail (no sink name, no secret)


class Deliverer:
    """Runs the delivery loop for one (route, alert) pair."""

    def __init__(
        self,
        settings: DeliverySettings,
        ledger: Ledger | None,
        metrics: Metrics,
        health: Health,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._metrics = metrics
        self._health = health
        self._sleep = sleep

    async def deliver(self, route: Route, alert: Alert) -> Result:
        name = route.sink.name
        ledger = self._ledger if route.use_ledger else None
        if ledger is None:
            return await self._attempts(route, lambda: route.sink.send(alert))
        return await self._reserved(ledger, Ledger.key(name, alert), name,
                                    lambda: self._attempts(route, lambda: route.sink.send(alert)))

    async def deliver_notification(self, route: Route, notification: Notification) -> Result:
        """Like `deliver`, for a group notification: ledger key from `notification.ledger_key`."""
        name = route.sink.name
        sink: GroupSink = route.sink

        async def attempts() -> Result:
            return await self._attempts(route, lambda: sink.send_group(notification))

        ledger = self._ledger if route.use_ledger else None
        if ledger is None:
            return await attempts()
        key = keys.delivered(name, notification.ledger_key, notification.first.dead_letter.raw_digest)
        return await self._reserved(ledger, key, name, attempts)

    async def deliver_resolve(self, route: Route, sink: ResolveSink, resolve: Resolve) -> Result:
        """Like `deliver`, for a resolve: ledger key `…:resolve:<idempotency key>:<digest>`."""
        name = route.sink.name

        async def attempts() -> Result:
            return await self._attempts(route, lambda: sink.send_resolve(resolve))

        ledger = self._ledger if route.use_ledger else None
        if ledger is None:
            return await attempts()
        return await self._reserved(ledger, ledger_key(name, resolve), name, attempts)

    async def _reserved(
        self, ledger: Ledger, key: str, name: str, attempts: Callable[[], Awaitable[Result]]
    ) -> Result:
        """Reserve `key`, run `attempts`, mark on success (the reservation is released otherwise)."""
        reservation = await ledger.reserve(key)
        if reservation is None:
            log.info("sink %s: %s already delivered (ledger)", name, key)
            return Result(name, "duplicate", 0)
        async with reservation:
            result = await attempts()
            if result.outcome == "delivered":
                await reservation.mark()
        return result

    async def _attempts(self, route: Route, send: Send) -> Result:
        name, count = route.sink.name, 0
        controller = retrying(self.settings, before_sleep=self._log_retry(name), sleep=self._sleep)
        try:
            async for attempt in controller:
                with attempt:
                    count += 1
                    await self._one(route, send)
        except SinkError as exc:
            self._health.set(f"sink:{name}", Status.DEGRADED, f"undeliverable: {short(exc)}")
            log.warning("sink %s: undeliverable after %d attempt(s): %s", name, count, short(exc))
            return Result(name, "undeliverable", count, exc.status, exc.detail)
        self._health.set(f"sink:{name}", Status.OK, "delivered")
        return Result(name, "delivered", count)

    async def _one(self, route: Route, send: Send) -> None:
        name = route.sink.name
        if route.pacer is not None:
            await route.pacer.wait()
        try:
            await send()
        except SinkRetryable as exc:
            self._metrics.delivery_attempts.labels(name, "retryable").inc()
            self._health.set(f"sink:{name}", Status.DEGRADED, f"retrying: {short(exc)}")
            if exc.status == 429 and exc.retry_after_s and route.pacer is not None:
                await route.pacer.hold(exc.retry_after_s)
            raise
        except SinkPermanent:
            self._metrics.delivery_attempts.labels(name, "permanent").inc()
            raise
        except Exception as exc:  # a sink bug must not crash the pipeline: make it final
            self._metrics.delivery_attempts.labels(name, "permanent").inc()
            log.exception("sink %s: unexpected error", name)
            raise SinkPermanent(name, f"unexpected {type(exc).__name__}") from None
        self._metrics.delivery_attempts.labels(name, "ok").inc()

    def _log_retry(self, name: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.info("sink %s: attempt %d failed (%s); retrying in %.2fs",
                     name, state.attempt_number, short(exc), wait)

        return before_sleep


def short(exc: BaseException | None) -> str:
    """`HTTP 503` or the error class: a secret-free detail for health and logs."""
    if isinstance(exc, SinkError) and exc.status is not None:
        return f"HTTP {exc.status}"
    if isinstance(exc, SinkError):
        return exc.detail[:120]
    return type(exc).__name__ if exc is not None else "?"
