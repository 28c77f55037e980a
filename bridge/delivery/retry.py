"""When to try a delivery again, and how long to wait first.

- Retry only SinkRetryable (408, 425, 429, 5xx, timeouts, connection errors,
  mapped by `bridge.sinks.http_errors`); everything else is final.
- Wait: the server's Retry-After (already parsed to seconds by the sink, from
  delta-seconds or an HTTP date), cut to `max_retry_after_s`; else full jitter
  `random(0, min(max_delay_s, base_delay_s * 2**n))`, n = 0 for the first retry.
- Stop after `max_attempts`, or when the next attempt would start after
  `deadline_s` (no attempt ever starts past the deadline).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
)
from tenacity.wait import wait_base

from bridge.core.errors import SinkRetryable
from bridge.settings import DeliverySettings


def is_retryable(exc: BaseException) -> bool:
    """The retry predicate: only errors a sink marked as worth another attempt."""
    return isinstance(exc, SinkRetryable)


def backoff_s(retry: int, settings: DeliverySettings, rng: random.Random) -> float:
    """Full jitter for retry number `retry` (0 for the first retry)."""
    window = min(settings.max_delay_s, settings.base_delay_s * 2.0 ** min(retry, 64))
    return rng.uniform(0.0, window)


def wait_s(
    failed_attempts: int,
    exc: BaseException | None,
    settings: DeliverySettings,
    rng: random.Random,
) -> float:
    """Seconds to wait after `failed_attempts` failures, the last one being `exc`."""
    if isinstance(exc, SinkRetryable) and exc.retry_after_s is not None:
        return min(max(exc.retry_after_s, 0.0), settings.max_retry_after_s)
    return backoff_s(max(failed_attempts - 1, 0), settings, rng)


class RetryAfterWait(wait_base):
    """tenacity wait strategy: Retry-After when the server sent one, else full jitter."""

    def __init__(self, settings: DeliverySettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._rng = rng or random.Random()

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None and outcome.failed else None
        return wait_s(retry_state.attempt_number, exc, self._settings, self._rng)


def retrying(
    settings: DeliverySettings,
    *,
    before_sleep: Callable[[RetryCallState], Awaitable[None] | None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
    elapsed_s: float = 0.0,
) -> AsyncRetrying:
    """A fresh retry controller for one delivery to one sink.

    `elapsed_s`: time the delivery already took before the controller starts (a first
    attempt made outside it), taken off the deadline.
    """
    return AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=RetryAfterWait(settings, rng),
        stop=stop_after_attempt(settings.max_attempts) | stop_before_delay(max(0.0, settings.deadline_s - elapsed_s)),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
