"""In-process pacing: the fallback of the fleet-wide limiter (bridge.stores.limits).

Used when there is no Redis to share limits through (`send-test`), or while
Redis cannot be reached. Hands out send slots `1 / per_second` apart; a 429
with Retry-After `hold`s the receiver in this process only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Pacer:
    """Hands out send slots `1 / per_second` apart; callers sleep until theirs."""

    def __init__(
        self,
        per_second: float,
        *,
        max_hold_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = 1.0 / per_second
        self._max_hold_s = max_hold_s
        self._clock = clock
        self._next = 0.0

    async def wait(self) -> float:
        """Reserve the next free slot and sleep until it comes; returns the seconds waited."""
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)
        return slot - now

    async def hold(self, seconds: float) -> None:
        """No new slot before `seconds` from now (the receiver asked us to back off)."""
        self._next = max(self._next, self._clock() + min(seconds, self._max_hold_s))
