"""Gathering calls made at about the same time into one Redis round trip.

`Batcher.submit(key, item)` waits for the result of `item`; the items submitted
for one key within `delay_s` (or until `max_items`) are handed to `run` as one
list, which returns one result per item, in order. A timer, not a task, waits
for the window. One runner task per key runs its batches one after the other
and stays for `linger_s` after its last batch, so a steady stream of batches
(a storm) costs one task, not one per batch. A caller that is cancelled while
waiting does not take its item out of the batch: the item is still run (each
`run` is built so that running an item, or not, leaves a consistent state).
An error of `run` is raised to every caller of the batch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

LINGER_S = 0.25


class Batcher(Generic[K, I, R]):
    def __init__(
        self,
        run: Callable[[K, list[I]], Awaitable[list[R]]],
        delay_s: float,
        max_items: int = 64,
        linger_s: float = LINGER_S,
    ) -> None:
        self._run = run
        self._delay_s = delay_s
        self._max_items = max_items
        self._linger_s = linger_s
        self._pending: dict[K, list[tuple[I, asyncio.Future[R]]]] = {}
        self._ready: dict[K, deque[list[tuple[I, asyncio.Future[R]]]]] = {}
        self._wake: dict[K, asyncio.Event] = {}
        self._runners: dict[K, asyncio.Task[None]] = {}

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
        if not batch:
            return
        self._ready.setdefault(key, deque()).append(batch)
        runner = self._runners.get(key)
        if runner is None or runner.done():
            self._wake[key] = asyncio.Event()
            self._runners[key] = asyncio.ensure_future(self._serve(key))
        else:
            self._wake[key].set()

    async def _serve(self, key: K) -> None:
        """Run the key's ready batches in order; leave once none came for `linger_s`."""
        ready, wake = self._ready[key], self._wake[key]
        try:
            while True:
                while ready:
                    await self._flush(key, ready.popleft())
                wake.clear()
                try:
                    async with asyncio.timeout(self._linger_s):
                        await wake.wait()
                except TimeoutError:
                    if not ready:  # no await between this check and leaving: a new batch starts a new runner
                        return
        finally:
            self._leave(key)

    def _leave(self, key: K) -> None:
        """Forget the runner; batches it did not run (it was cancelled) fail their callers."""
        self._runners.pop(key, None)
        self._wake.pop(key, None)
        for batch in self._ready.pop(key, ()):
            for _, future in batch:
                future.cancel()

    async def _flush(self, key: K, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run(key, [item for item, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:
                    future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)


async def flush_while_busy(
    has_work: Callable[[], bool], flush: Callable[[], Awaitable[None]], delay_s: float, linger_s: float = LINGER_S
) -> None:
    """Call `flush` every `delay_s` while `has_work()`; return once `linger_s` passed without work.

    The body of a background flusher (the hand-off's forwards, the summary cache's writes): work
    added during a flush goes in the next round, and a storm costs one task, not one per round.
    """
    idle, idle_rounds = 0, max(1, round(linger_s / delay_s))
    while idle < idle_rounds:
        await asyncio.sleep(delay_s)  # gather the work of concurrent callers
        if not has_work():
            idle += 1
            continue
        idle = 0
        await flush()
