"""Worker slots: `sources.concurrency` entries (list entries and kind records) in flight at most."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Slots:
    """A semaphore the claimers take from before each claim, and each finished entry gives back."""

    def __init__(self, size: int, on_busy_tick: Callable[[], None]) -> None:
        self._free = asyncio.Semaphore(size)
        self._on_busy_tick = on_busy_tick

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait for a free slot, ticking every second while busy; False once `stop` is set."""
        while not stop.is_set():
            try:
                async with asyncio.timeout(1.0):  # no task per claim, unlike wait_for on 3.11
                    await self._free.acquire()
            except TimeoutError:
                self._on_busy_tick()
                continue
            if stop.is_set():
                self._free.release()
                return False
            return True
        return False

    async def take_free(self, most: int) -> int:
        """Slots free right now (up to `most`): acquire() on a free semaphore never waits."""
        taken = 0
        while taken < most and not self._free.locked():
            await self._free.acquire()
            taken += 1
        return taken

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._free.release()
