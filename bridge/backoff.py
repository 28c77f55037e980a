"""Waiting out a Redis outage: a doubling pause, and a periodic upkeep job that survives errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

log = logging.getLogger(__name__)

REDIS_ERRORS = (RedisError, OSError)
MAX_BACKOFF_S = 5.0


@dataclass
class Backoff:
    """Doubling pause for loops that wait out a Redis outage."""

    delay: float = 0.1

    async def wait(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, MAX_BACKOFF_S)

    def reset(self) -> None:
        self.delay = 0.1


async def every(
    interval: float,
    job: Callable[[], Awaitable[object]],
    stop: asyncio.Event,
    redis_up: Callable[[], None],
    redis_down: Callable[[BaseException], None],
) -> None:
    """Run `job` every `interval` s until `stop`; its errors are logged (Redis ones reported), never raised."""
    while not stop.is_set():
        try:
            await job()
            redis_up()
        except REDIS_ERRORS as exc:
            redis_down(exc)
        except Exception:
            log.exception("upkeep task %s failed; it keeps running", getattr(job, "__name__", job))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
