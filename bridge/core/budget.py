"""A calls-per-minute budget for the gateway (sliding window, in process).

The fleet-wide budget lives in Redis (bridge.stores.gateway_gate); this one is its
fallback while Redis cannot be reached.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 60.0


class CallBudget:
    """At most `per_minute` calls in any 60 s window; 0 means no limit."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._clock = clock
        self._calls: deque[float] = deque()

    def try_acquire(self) -> bool:
        """Spend one call if the window has room; False (nothing spent) otherwise."""
        if self._limit <= 0:
            return True
        now = self._clock()
        while self._calls and now - self._calls[0] >= WINDOW_S:
            self._calls.popleft()
        if len(self._calls) >= self._limit:
            return False
        self._calls.append(now)
        return True

    def remaining(self) -> int | None:
        if self._limit <= 0:
            return None
        now = self._clock()
        return self._limit - sum(1 for t in self._calls if now - t < WINDOW_S)
