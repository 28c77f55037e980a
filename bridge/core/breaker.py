"""An in-process circuit breaker for the gateway, plus a pause for 429 Retry-After.

The fleet-wide breaker lives in Redis (bridge.stores.gateway_gate); this one is its
fallback while Redis cannot be reached, with the same states:

    closed --(N consecutive failures)--> open --(cool-down)--> half-open
    half-open --(probe succeeds)--> closed;  --(probe fails)--> open

While open, or while paused by a 429, calls are refused at once and the
summarizer falls back. Half-open lets one probe call through at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._threshold = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False
        self._paused_until = 0.0
        self._state = BreakerState.CLOSED

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self._cooldown_s:
            self._state = BreakerState.HALF_OPEN
            self._probing = False
        return self._state

    @property
    def paused(self) -> bool:
        """True while a 429's Retry-After has not passed."""
        return self._clock() < self._paused_until

    @property
    def paused_s(self) -> float:
        """Seconds the 429 pause still lasts (0 when not paused)."""
        return max(0.0, self._paused_until - self._clock())

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def allow(self) -> bool:
        """May a call go now? In half-open, only one probe at a time."""
        if self.paused:
            return False
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return True
        return False

    def abandon(self) -> None:
        """An allowed call was not made after all (e.g. no budget): free the probe slot."""
        self._probing = False

    def record_success(self) -> None:
        self._failures = 0
        self._probing = False
        self._state = BreakerState.CLOSED

    def record_failure(self) -> None:
        self._failures += 1
        self._probing = False
        if self._state is BreakerState.HALF_OPEN or self._failures >= self._threshold:
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()

    def pause(self, seconds: float) -> None:
        """Refuse every call for `seconds` (the gateway said Retry-After)."""
        self._paused_until = max(self._paused_until, self._clock() + max(seconds, 0.0))
