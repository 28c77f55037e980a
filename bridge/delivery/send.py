"""One alert to one sink: ledger reservation, paced attempts with retries, ledger mark.

Outcomes: `delivered` (a 2xx, now in the ledger), `duplicate` (the ledger
already had it, or another sender delivered it while this one waited on its
reservation), `undeliverable` (permanent error, attempts or deadline used up;
the reservation is released). Redis errors from the ledger propagate: the
caller cannot record the outcome, so the whole entry must be retried (the
ledger makes that safe). Pacing is fleet-wide (bridge.stores.limits).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol, runtime_checkable

from tenacity import RetryCallState

from bridge.core.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, Notification
from bridge.delivery.resolve import Resolve
from bridge.delivery.retry import retrying
from bridge.settings import DeliverySettings, SinkSettings
from bridge.sinks.sink import Sink
from bridge.sinks.sink_registry import SINKS
from bridge.stores.ledger import Ledger, notification_key, resolve_key
from bridge.stores.limits import Limiter
from bridge.telemetry.port import NO_TELEMETRY, SpanHandle, Telemetry

log = logging.getLogger(__name__)

Outcome = Literal["delivered", "duplicate", "undeliverable"]
Send = Callable[[], Awaitable[None]]


class GroupSink(Protocol):
    async def send_group(self, notification: Notification) -> None: ...


@runtime_checkable
class ResolveSink(Protocol):
    async def send_resolve(self, resolve: Resolve) -> None: ...

    def group_dedup_key(self, first: Alert) -> str:
        """The dedup key a group's triggers carry, given the group's first alert."""
        ...


@dataclass(frozen=True)
class Route:
    """A configured sink: its settings (routing), the sink, and optional fleet-wide pacing."""

    settings: SinkSettings
    sink: Sink
    pacer: Limiter | None = None
    use_ledger: bool = True

    @property
    def resolves(self) -> bool:
        """This sink sends a resolve when an alerted job is retried by hand (its plug-in's trait)."""
        return SINKS.of(self.settings).resolves(self.settings)


@dataclass(frozen=True)
class Result:
    sink: str
    outcome: Outcome
    attempts: int
    status: int | None = None
    error: str | None = None  # the SinkError's detail (no sink name, no secret)
    mark: str | None = None  # delivered with `mark_later`: the ledger key the caller must mark


class Deliverer:
    """Runs the delivery loop for one (route, alert) pair."""

    def __init__(
        self,
        settings: DeliverySettings,
        ledger: Ledger | None,
        metrics: Metrics,
        health: Health,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self._telemetry = telemetry
        self.settings = settings
        self._ledger = ledger
        self._metrics = metrics
        self._health = health
        self._sleep = sleep

    def ledger_for(self, route: Route) -> Ledger | None:
        return self._ledger if route.use_ledger else None

    async def deliver(
        self, route: Route, alert: Alert, *, token: str | None = None, mark_later: bool = False
    ) -> Result:
        """`token`: the ledger key is already reserved by it (a take with reservations);
        `mark_later`: on success the mark is left to the caller (`Result.mark`)."""
        with self._telemetry.delivery(route.sink.name, route.settings.type, alert.bridge_trace) as span:
            return traced(span, await self._deliver(route, alert, token, mark_later))

    async def _deliver(self, route: Route, alert: Alert, token: str | None, mark_later: bool) -> Result:
        name = route.sink.name
        ledger = self.ledger_for(route)
        if ledger is None:
            return await self._attempts(route, lambda: route.sink.send(alert))
        key = Ledger.key(name, alert)
        reservation = ledger.reserved(key, token) if token else await ledger.reserve(key)
        if reservation is None:
            log.info("sink %s: %s already delivered (ledger)", name, key)
            return Result(name, "duplicate", 0)
        async with reservation:
            result = await self._attempts(route, lambda: route.sink.send(alert))
            if result.outcome == "delivered" and mark_later:
                return replace(result, mark=reservation.mark_later())
            if result.outcome == "delivered":
                await reservation.mark()
        return result

    async def deliver_notification(self, route: Route, notification: Notification) -> Result:
        """Like `deliver`, for a group notification: ledger key from `notification.ledger_key`
        (traced as a child of the group's first alert's span)."""
        parent = notification.first.bridge_trace
        with self._telemetry.delivery(route.sink.name, route.settings.type, parent) as span:
            span.set("dlq_bridge.group.count", notification.count)
            return traced(span, await self._deliver_notification(route, notification))

    async def _deliver_notification(self, route: Route, notification: Notification) -> Result:
        name = route.sink.name
        sink: GroupSink = route.sink

        async def attempts() -> Result:
            return await self._attempts(route, lambda: sink.send_group(notification))

        ledger = self._ledger if route.use_ledger else None
        if ledger is None:
            return await attempts()
        key = notification_key(name, notification)
        return await self._reserved(ledger, key, name, attempts)

    async def deliver_resolve(
        self, route: Route, sink: ResolveSink, resolve: Resolve, *, token: str | None = None
    ) -> Result:
        """Like `deliver`, for a resolve: ledger key `…:resolve:<idempotency key>:<digest>`
        (`token`: already reserved by a take with reservations)."""
        name = route.sink.name

        async def attempts() -> Result:
            return await self._attempts(route, lambda: sink.send_resolve(resolve))

        ledger = self._ledger if route.use_ledger else None
        if ledger is None:
            return await attempts()
        key = resolve_key(name, resolve)
        if token is None:
            return await self._reserved(ledger, key, name, attempts)
        async with ledger.reserved(key, token) as reservation:
            result = await attempts()
            if result.outcome == "delivered":
                await reservation.mark()
        return result

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
        """The first attempt runs bare; tenacity takes over only once it failed retryably."""
        started = time.monotonic()
        try:
            await self._one(route, send)
            return self._delivered(route.sink.name, 1)
        except SinkRetryable as exc:
            first = exc
        except SinkError as exc:
            return self._undeliverable(route.sink.name, 1, exc)
        return await self._retries(route, send, first, time.monotonic() - started)

    async def _retries(self, route: Route, send: Send, first: SinkRetryable, elapsed_s: float) -> Result:
        """tenacity from the second attempt on: its attempt 1 replays the first failure (no send)."""
        name, count, replay = route.sink.name, 1, True
        controller = retrying(self.settings, before_sleep=self._log_retry(name), sleep=self._sleep, elapsed_s=elapsed_s)
        try:
            async for attempt in controller:
                with attempt:
                    if replay:
                        replay = False
                        raise first
                    count += 1
                    await self._one(route, send)
        except SinkError as exc:
            return self._undeliverable(name, count, exc)
        return self._delivered(name, count)

    def _delivered(self, name: str, count: int) -> Result:
        self._health.set(f"sink:{name}", Status.OK, "delivered")
        return Result(name, "delivered", count)

    def _undeliverable(self, name: str, count: int, exc: SinkError) -> Result:
        self._health.set(f"sink:{name}", Status.DEGRADED, f"undeliverable: {short(exc)}")
        log.warning("sink %s: undeliverable after %d attempt(s): %s", name, count, short(exc))
        return Result(name, "undeliverable", count, exc.status, exc.detail)

    async def _one(self, route: Route, send: Send) -> None:
        name = route.sink.name
        if route.pacer is not None:
            await route.pacer.wait()
        try:
            with self._telemetry.stage("attempt") as attempt:
                await attempt_of(attempt, send)
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
        self._metrics.child(self._metrics.delivery_attempts, name, "ok").inc()

    def _log_retry(self, name: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.info("sink %s: attempt %d failed (%s); retrying in %.2fs",
                     name, state.attempt_number, short(exc), wait)

        return before_sleep


def traced(span: SpanHandle, result: Result) -> Result:
    """`result` on its delivery span: outcome, attempts, the last status; an error unless delivered."""
    span.set("dlq_bridge.delivery.outcome", result.outcome)
    span.set("dlq_bridge.delivery.attempts", result.attempts)
    span.set("http.response.status_code", result.status)
    if result.outcome == "undeliverable":
        span.fail(f"http_{result.status}" if result.status else "undeliverable")
    return result


async def attempt_of(span: SpanHandle, send: Send) -> None:
    """One send on its attempt span (a failed one: its status, and `error.type` from the span)."""
    try:
        await send()
    except SinkError as exc:
        span.set("http.response.status_code", exc.status)
        raise


def short(exc: BaseException | None) -> str:
    """`HTTP 503` or the error class: a secret-free detail for health and logs."""
    if isinstance(exc, SinkError) and exc.status is not None:
        return f"HTTP {exc.status}"
    if isinstance(exc, SinkError):
        return exc.detail[:120]
    return type(exc).__name__ if exc is not None else "?"
