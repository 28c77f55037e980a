"""Fleet-wide rate limits per receiver, in Redis (docs/design.md, section 5b).

Slack takes about one message a second per incoming webhook, PagerDuty about
120 events a minute per routing key, whatever number of replicas send. Every
replica asks one Lua script (GCRA, generic cell rate algorithm) on one key per
receiver before each request:

    dlq_bridge:limit:{<kind>:<sha256 of the URL or routing key>}  ->  TAT (ms)

TAT, the "theoretical arrival time", is the earliest moment (Redis's own
clock, so replicas' clocks never matter) the next request may start. A request
at `now >= TAT` is let through and sets TAT = now + interval; earlier callers
are told how long to wait, sleep, and ask again (nothing is reserved ahead,
so a hold applies at once to everyone waiting). There is no burst allowance:
requests are spaced at least `interval` apart, and `interval` carries a
HEADROOM so network jitter cannot bunch two arrivals into one second.

A 429's Retry-After moves TAT to `now + retry_after` (capped at
`max_retry_after_s`): the receiver is held for every replica. When Redis
cannot be reached the limiter falls back to an in-process Pacer, so a Redis
outage slows nothing down that was not already stuck on the ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.core.metrics import Metrics
from bridge.stores import keys
from bridge.stores.hold import SharedHold
from bridge.stores.pacing import Pacer

log = logging.getLogger(__name__)

HEADROOM = 0.1  # spacing = 1.1 / rate: stays under the limit despite arrival jitter
_ERRORS = (RedisError, OSError, TimeoutError)

# KEYS[1] the receiver's TAT key. ARGV[1] interval ms, ARGV[2] hold ms (0: acquire).
# Returns 0 when the caller may send now, else the ms to wait before asking again.
GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local hold = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if hold > 0 then
  if now + hold > tat then
    redis.call('SET', KEYS[1], now + hold, 'PX', hold + 1000)
  end
  return 0
end
if tat > now then
  return tat - now
end
redis.call('SET', KEYS[1], now + interval, 'PX', interval + 1000)
return 0
"""


class Limiter(Protocol):
    """What a route paces itself with (fleet-wide or in-process)."""

    async def wait(self) -> float: ...

    async def hold(self, seconds: float) -> None: ...


def receiver_ref(kind: str, secret: str) -> str:
    """`slack:<sha256>`: names a receiver without its secret URL or key."""
    return f"{kind}:{hashlib.sha256(secret.encode()).hexdigest()[:32]}"


class RateLimiter:
    """At most `per_second` requests per second to one receiver, across the fleet."""

    def __init__(
        self,
        client: redis.Redis,
        ref: str,
        per_second: float,
        *,
        max_hold_s: float = 300.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.key = keys.limit(ref)
        self.interval_s = (1.0 + HEADROOM) / per_second
        self._interval_ms = max(1, round(self.interval_s * 1000))
        self._max_hold_s = max_hold_s
        self._script = client.register_script(GCRA)
        self._sleep = sleep
        self._local = Pacer(1.0 / self.interval_s, max_hold_s=max_hold_s)

    async def wait(self) -> float:
        """Sleep until this replica may send; returns the seconds slept."""
        waited = 0.0
        while True:
            try:
                wait_ms = int(await self._script(keys=[self.key], args=[self._interval_ms, 0]))
            except _ERRORS as exc:
                log.warning("rate limit in Redis unavailable (%s); pacing in process",
                            type(exc).__name__)
                return waited + await self._local.wait()
            if wait_ms <= 0:
                return waited
            await self._sleep(wait_ms / 1000.0)
            waited += wait_ms / 1000.0

    async def hold(self, seconds: float) -> None:
        """No replica sends to this receiver for `seconds` (capped): it said Retry-After."""
        hold_ms = round(min(max(seconds, 0.0), self._max_hold_s) * 1000)
        if hold_ms <= 0:
            return
        try:
            await self._script(keys=[self.key], args=[self._interval_ms, hold_ms])
        except _ERRORS as exc:
            log.warning("rate-limit hold not shared (%s); holding in process", type(exc).__name__)
            await self._local.hold(seconds)


class Limiters:
    """One limiter per receiver (shared by every sink that talks to it), counted per sink."""

    def __init__(
        self, client: redis.Redis | None, max_hold_s: float, metrics: Metrics | None = None
    ) -> None:
        self._client = client
        self._max_hold_s = max_hold_s
        self._metrics = metrics
        self._by_ref: dict[str, Limiter] = {}

    def get(self, sink: str, kind: str, secret: str, per_second: float) -> Limiter:
        ref = receiver_ref(kind, secret)
        limiter = self._by_ref.get(ref)
        if limiter is None:
            limiter = self._by_ref[ref] = self._build(ref, per_second)
        return Counted(limiter, sink, self._metrics) if self._metrics is not None else limiter

    def held(self, sink: str, kind: str, secret: str) -> Limiter | None:
        """For a receiver with no rate limit: only a 429's hold, shared by the fleet (None without Redis)."""
        if self._client is None:
            return None
        ref = receiver_ref(kind, secret)
        limiter = self._by_ref.get(ref)
        if limiter is None:
            limiter = self._by_ref[ref] = SharedHold(self._client, ref, max_hold_s=self._max_hold_s)
        return Counted(limiter, sink, self._metrics) if self._metrics is not None else limiter

    def _build(self, ref: str, per_second: float) -> Limiter:
        if self._client is None:  # e.g. `send-test`: one message, no Redis needed
            return Pacer(per_second, max_hold_s=self._max_hold_s)
        return RateLimiter(self._client, ref, per_second, max_hold_s=self._max_hold_s)


class Counted:
    """A limiter whose waits count into `dlq_bridge_rate_limit_waits_total` for one sink."""

    def __init__(self, inner: Limiter, sink: str, metrics: Metrics) -> None:
        self._inner = inner
        self._sink = sink
        self._metrics = metrics

    async def wait(self) -> float:
        waited = await self._inner.wait()
        if waited > 0.001:
            self._metrics.rate_limit_waits.labels(self._sink).inc()
            self._metrics.rate_limit_wait_seconds.labels(self._sink).inc(waited)
        return waited

    async def hold(self, seconds: float) -> None:
        await self._inner.hold(seconds)
