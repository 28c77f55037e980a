"""Blocking work on daemon threads, each call with a deadline (docs/design.md, section 7).

The event loop only waits: `/healthz`, the heartbeat and the claim loop keep
ticking whatever one call does. The deadline runs from the moment a thread
starts the call, so time spent queued behind a slow call never counts against
an innocent one. A thread cannot be stopped: a call past its deadline is
abandoned (its result dropped), a fresh thread takes its place, and the
abandoned one ends when the call returns (`runaways` counts those still
running). The threads are daemons, so a call that never returns cannot hold up
the process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """A call ran longer than its deadline; it was abandoned."""


@dataclass(eq=False)
class _Job(Generic[T]):
    call: Callable[[], T]
    loop: asyncio.AbstractEventLoop
    started: asyncio.Future[None]
    done: asyncio.Future[T]
    cancelled: bool = False
    finished: bool = False
    abandoned: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _settle(future: asyncio.Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class OffLoop:
    """A small pool of daemon threads running calls with deadlines."""

    def __init__(self, threads: int, name: str = "offloop") -> None:
        self._size = threads
        self._name = name
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.runaways = 0
        for _ in range(threads):
            self._spawn()

    def _spawn(self) -> None:
        threading.Thread(target=self._work, name=self._name, daemon=True).start()

    async def run(self, call: Callable[[], T], deadline_s: float) -> T:
        """`call()` on a thread; DeadlineExceeded after `deadline_s` of running."""
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(call, loop, loop.create_future(), loop.create_future())
        self._jobs.put(job)
        try:
            await job.started
        except asyncio.CancelledError:
            job.cancelled = True
            raise
        try:
            async with asyncio.timeout(deadline_s):
                return await asyncio.shield(job.done)
        except TimeoutError:
            self._abandon(job)
            raise DeadlineExceeded(f"still running after {deadline_s:g}s") from None

    def _abandon(self, job: _Job[Any]) -> None:
        with job.lock:
            if job.finished:
                return
            job.abandoned = True
        with self._lock:
            self.runaways += 1
        self._spawn()  # keeps the pool at full strength while the runaway goes on

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job.cancelled:
                continue
            self._post(job, job.started)
            try:
                outcome: tuple[Any, BaseException | None] = (job.call(), None)
            except BaseException as exc:  # handed to the awaiting coroutine
                outcome = (None, exc)
            with job.lock:
                job.finished = True
            self._post(job, job.done, *outcome)
            if job.abandoned:
                with self._lock:
                    self.runaways -= 1
                return  # its replacement already serves the queue

    @staticmethod
    def _post(
        job: _Job[Any], future: asyncio.Future[Any], result: Any = None, error: BaseException | None = None
    ) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            job.loop.call_soon_threadsafe(_settle, future, result, error)

    def close(self) -> None:
        """Let idle threads end (runaways end when their call returns)."""
        for _ in range(self._size):
            self._jobs.put(None)
