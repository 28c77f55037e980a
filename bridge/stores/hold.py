"""A receiver with no rate limit that can still say "back off" to the whole fleet.

Webhook receivers (internal HTTP APIs) have no published rate, so nothing paces
them; but when one answers 429 with Retry-After, every replica must hold off,
not only the one that got the answer (docs/design.md, section 5b). The hold
is one key per receiver, the same as a paced receiver's:

    dlq_bridge:limit:{webhook:<sha256 of the URL>}  ->  when the hold ends (ms, Redis's clock)

Asking Redis before each request would add a round trip per delivery for a
hold that is almost never there, so each replica reads the key at most once
per `refresh_s` and otherwise trusts what it last read: another replica's hold
reaches this one within `refresh_s` (1 s); the replica that got the 429 holds
at once. Redis unreachable: the hold stays in process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.stores import keys

log = logging.getLogger(__name__)

_ERRORS = (RedisError, OSError, TimeoutError)
REFRESH_S = 1.0

# KEYS[1] the hold key. ARGV[1] hold ms (0: only read). Returns the ms the hold still runs.
HOLD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold = tonumber(ARGV[1])
local ends = tonumber(redis.call('GET', KEYS[1]) or '0')
if hold > 0 and now + hold > ends then
  ends = now + hold
  redis.call('SET', KEYS[1], ends, 'PX', hold + 1000)
end
return math.max(0, ends - now)
"""


class SharedHold:
    """No pacing; a 429's Retry-After holds this receiver for every replica (within `refresh_s`)."""

    def __init__(
        self,
        client: redis.Redis,
        ref: str,
        *,
        max_hold_s: float = 300.0,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.key = keys.limit(ref)
        self._script = client.register_script(HOLD)
        self._max_hold_s = max_hold_s
        self._refresh_s = refresh_s
        self._clock = clock
        self._sleep = sleep
        self._until = 0.0  # on `clock`: no request to this receiver before it
        self._next_read = 0.0

    async def wait(self) -> float:
        """Sleep while the receiver is held; returns the seconds slept."""
        now = self._clock()
        if now >= self._next_read:
            self._next_read = now + self._refresh_s
            await self._learn(now, 0)
        if self._until <= now:
            return 0.0
        await self._sleep(self._until - now)
        return self._until - now

    async def hold(self, seconds: float) -> None:
        """No replica sends to this receiver for `seconds` (cut to `max_hold_s`): it said Retry-After."""
        capped = min(max(seconds, 0.0), self._max_hold_s)
        if capped <= 0:
            return
        now = self._clock()
        self._until = max(self._until, now + capped)
        await self._learn(now, round(capped * 1000))

    async def _learn(self, now: float, hold_ms: int) -> None:
        try:
            left_ms = int(await self._script(keys=[self.key], args=[hold_ms]))
        except _ERRORS as exc:  # a read fails every refresh_s while Redis is down: only a hold says so
            level = logging.WARNING if hold_ms else logging.DEBUG
            log.log(level, "receiver hold in Redis unavailable (%s); held in process only", type(exc).__name__)
            return
        self._until = max(self._until, now + min(left_ms / 1000.0, self._max_hold_s))
