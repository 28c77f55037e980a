"""Waiting out a Redis outage: a doubling pause (the periodic upkeep loop is bridge/core/periodic.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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
