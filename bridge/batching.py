"""Gathering calls made at about the same time into one Redis round trip.

`Batcher.submit(key, item)` waits for the result of `item`; the items submitted
for one key within `delay_s` (or until `max_items`) are handed to `run` as one
list, which returns one result per item, in order. A timer, not a task, waits
for the window; one task runs each batch. A caller that is cancelled while
waiting does not take its item out of the batch: the item is still run (each
`run` is built so that running an item, or not, leaves a consistent state).
An error of `run` is raised to every caller of the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class Batcher(Generic[K, I, R]):
    def __init__(
        self, run: Callable[[K, list[I]], Awaitable[list[R]]], delay_s: float, max_items: int = 64
    ) -> None:
        self._run = run
        self._delay_s = delay_s
        self._max_items = max_items
        self._pending: dict[K, list[tuple[I, asyncio.Future[R]]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def submit(self, key: K, item: I) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        batch = self._pending.setdefault(key, [])
        batch.append((item, future))
        if len(batch) >= self._max_items:
            self._start(key)
        elif len(batch) == 1:
            loop.call_later(self._delay_s, self._start, key)
        return await future

    def _start(self, key: K) -> None:
        batch = self._pending.pop(key, None)
        if batch:
            task = asyncio.ensure_future(self._flush(key, batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _flush(self, key: K, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run(key, [item for item, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def drain(self) -> None:
        """Run what is pending now and wait for every batch under way (a stop)."""
        for key in list(self._pending):
            self._start(key)
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
