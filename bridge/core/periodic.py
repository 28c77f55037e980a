"""One periodic loop for every upkeep job (heartbeat, rescan, reap, outbox sweep, queue monitor)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bridge.core.errors import REDIS_ERRORS

log = logging.getLogger(__name__)


async def every(
    interval: float,
    job: Callable[[], Awaitable[object]],
    stop: asyncio.Event,
    *,
    what: str = "upkeep",
    on_success: Callable[[], None] | None = None,
    on_redis_error: Callable[[BaseException], None] | None = None,
) -> None:
    """Run `job` every `interval` seconds until `stop`; a failure is logged (or handed to
    `on_redis_error` when Redis is away) and the loop goes on."""
    while not stop.is_set():
        try:
            await job()
            if on_success is not None:
                on_success()
        except REDIS_ERRORS as exc:
            if on_redis_error is not None:
                on_redis_error(exc)
            else:
                log.warning("%s: Redis unavailable (%s)", what, type(exc).__name__)
        except Exception:
            log.exception("%s failed; it keeps running", what)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
