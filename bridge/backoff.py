"""A doubling pause for loops that wait out a Redis outage."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from redis.exceptions import RedisError

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
