"""In-process pacing: at most N requests per second per receiver.

Slack allows about one message a second per incoming webhook, PagerDuty about
120 events a minute per routing key. Each receiver (keyed by a hash of its
URL or routing key, never the secret itself) has its own Pacer, so pacing one
sink never delays another. A 429 with Retry-After `hold`s the whole receiver.
"""

from __future__ import annotations

import asyncio
import hashlib
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

    async def wait(self) -> None:
        """Reserve the next free slot and sleep until it comes."""
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)

    def hold(self, seconds: float) -> None:
        """No new slot before `seconds` from now (the receiver asked us to back off)."""
        self._next = max(self._next, self._clock() + min(seconds, self._max_hold_s))


class Pacers:
    """One Pacer per receiver, shared by every sink that talks to it."""

    def __init__(self, max_hold_s: float = 300.0) -> None:
        self._max_hold_s = max_hold_s
        self._pacers: dict[str, Pacer] = {}

    def get(self, kind: str, secret: str, per_second: float) -> Pacer:
        ref = f"{kind}:{hashlib.sha256(secret.encode()).hexdigest()}"
        pacer = self._pacers.get(ref)
        if pacer is None:
            pacer = self._pacers[ref] = Pacer(per_second, max_hold_s=self._max_hold_s)
        return pacer
