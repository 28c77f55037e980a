"""The solo lane: a suspect's intake runs alone, so a death during it convicts that suspect.

A consumer that dies (kill -9, OOM kill, eviction) took every entry it held down with it, and one
of them at most was the cause. So a death is never held against everything held: the entries come
back as *suspects* (`bridge.sources.source.return_held`), from a list or any other kind. A
suspect's intake (normalize, redact, fingerprint: the only stage that reads the entry's bytes)
waits until no other intake of this consumer runs, then runs alone, while no other starts, under a note in Redis
(`dlq_bridge:solo:<consumer>`) naming it. A death while the note is up is held against that
suspect alone; after `sources.quarantine_after` such deaths the entry is quarantined. A bystander
simply finishes (its summary and hand-off run like any other entry's), and its suspect mark goes
with the hand-off (docs/design.md, section 3b).

Suspects queue in claim order, those with fewer solo deaths first in a batch, so the bystanders of
a real poison pill are cleared before the pill runs (and kills the process) again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from bridge.core.backoff import Backoff
from bridge.core.claimed import Claimed
from bridge.core.errors import REDIS_ERRORS
from bridge.sources.source import Source

log = logging.getLogger(__name__)

T = TypeVar("T")


class IntakeGate:
    """Many intakes at once (`enter_shared`), or one alone (`alone`); a waiting `alone` goes first."""

    def __init__(self) -> None:
        self._running = 0
        self._wanted = 0  # alone runs waiting or running: no shared intake starts meanwhile
        self._open = asyncio.Event()
        self._open.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._one = asyncio.Lock()

    async def enter_shared(self) -> None:
        """Start a shared intake (pair with `leave_shared`; plain calls: this is the hot path)."""
        while self._wanted:
            await self._open.wait()
        self._running += 1
        self._drained.clear()

    def leave_shared(self) -> None:
        self._running -= 1
        if not self._running:
            self._drained.set()

    @contextlib.asynccontextmanager
    async def alone(self) -> AsyncIterator[None]:
        self._wanted += 1
        self._open.clear()
        try:
            async with self._one:
                await self._drained.wait()
                yield
        finally:
            self._wanted -= 1
            if not self._wanted:
                self._open.set()


class SoloLane:
    """Runs each intake through the gate: a suspect's alone, under its solo note."""

    def __init__(self, source: Source, redis_down: Callable[[BaseException], None]) -> None:
        self._source = source
        self._redis_down = redis_down
        self._gate = IntakeGate()
        self.ran_alone = 0

    async def intake(self, claimed: Claimed | None, job: Callable[[], Awaitable[T]]) -> T:
        """`job` (an intake) for `claimed`; not a suspect (or None): beside the others."""
        if claimed is None or not claimed.suspect:
            await self._gate.enter_shared()
            try:
                return await job()
            finally:
                self._gate.leave_shared()
        async with self._gate.alone():
            log.info("running a suspect of %s alone (its consumer died holding it)", claimed.source_key)
            await self._retry(functools.partial(self._source.run_alone, claimed))
            try:
                result = await job()
            except BaseException:
                with contextlib.suppress(*REDIS_ERRORS):
                    await self._source.ran_alone()
                raise
            await self._retry(self._source.ran_alone)
            self.ran_alone += 1
            return result

    async def _retry(self, step: Callable[[], Awaitable[None]]) -> None:
        backoff = Backoff()
        while True:
            try:
                await step()
                return
            except REDIS_ERRORS as exc:
                self._redis_down(exc)
                await backoff.wait()
