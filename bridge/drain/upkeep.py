"""The drain's upkeep over every source (docs/design.md, sections 2, 2b and 3b).

Each runs every few seconds beside the claim loops, for all sources at once:

- heartbeat: this consumer is alive (`dlq_bridge:consumer:<id>`, with its release and the record
  formats it reads), then the fleet's heartbeats say which record format to write
  (`bridge.delivery.fleet`);
- rescan: new DLQs and new watched stores; the depth gauges and health checks;
- reap: the in-flight lists of consumers whose heartbeat expired go back, the death counted
  against the suspect the dead consumer ran alone (`bridge.sources.source.reap_dead`; one pass over
  every source, so a death is judged on everything that consumer held);
- own-list sweep: an entry in our own in-flight list that no worker holds (a claim whose reply was
  lost) goes back, once seen unheld in two sweeps in a row;
- leave checks (watched kinds): alerted jobs that left the store by hand get their resolve queued;
- index trim: the console's search index is trimmed to the records the hand-off kept, every
  `search_index.TRIM_EVERY_S`, whether or not anyone searches (docs/design.md, "Every key").
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from bridge.core import names
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.core.periodic import every
from bridge.delivery.fleet import FleetFormat
from bridge.drain.depths import DepthView
from bridge.settings import SourcesSettings
from bridge.sources.kind_port import why_unreadable
from bridge.sources.source import Forward, Source, reap_dead, recover_own
from bridge.stores.search_index import TRIM_EVERY_S, SearchIndex

log = logging.getLogger(__name__)


class Upkeep:
    """The periodic jobs of one consumer's drain (see module doc)."""

    def __init__(
        self,
        sources: Sequence[Source],
        settings: SourcesSettings,
        metrics: Metrics,
        health: Health,
        redis_down: Callable[[BaseException], None],
        search_index: SearchIndex | None = None,
        fleet: FleetFormat | None = None,
    ) -> None:
        self._sources = list(sources)
        self._search_index = search_index
        self._fleet = fleet
        self._lists = self._sources[0]  # consumer-wide keys (heartbeat) go through the first source
        self._settings = settings
        self._metrics = metrics
        self._health = health
        self._redis_down = redis_down
        self._depths = DepthView(metrics, health)
        self._unheld: set[tuple[str, bytes]] = set()

    def tasks(
        self, stop: asyncio.Event, held: Counter[tuple[str, bytes]], forward: Forward,
        rescan: Callable[[], Awaitable[None]], burst: bool,
    ) -> list[asyncio.Task[None]]:
        settings = self._settings
        jobs: list[tuple[float, Callable[[], Awaitable[object]]]] = [
            (settings.heartbeat_interval_s, self._beat),
            (settings.rescan_interval_s, rescan),
            (settings.reap_interval_s, self.reap),
            (settings.reap_interval_s, lambda: self.sweep_own(held)),
        ]
        if self._search_index is not None:
            jobs.append((TRIM_EVERY_S, self._search_index.trim_indexed))
        tasks = [asyncio.create_task(self._every(interval, job, stop)) for interval, job in jobs]
        if not burst:
            tasks += [asyncio.create_task(self._leave_checks(source, forward, stop))
                      for source in self._sources if source.leave_check_s is not None]
        return tasks

    async def start(self) -> int:
        """At start: heartbeat and the fleet's record format (before the first hand-off), and give
        back what a previous run of this consumer held."""
        await self._beat()
        return await recover_own(self._sources)

    async def _beat(self) -> None:
        await self._lists.heartbeat()
        if self._fleet is not None:
            await self._fleet.refresh()

    async def reap(self) -> None:
        self._metrics.reaped.inc(await reap_dead(self._sources))

    async def sweep_own(self, held: Counter[tuple[str, bytes]]) -> None:
        """Give back entries stuck in our in-flight lists that no worker holds.

        A claim whose reply was lost (Redis restarted, a timeout) leaves an entry in our list that
        nobody processes. Only entries seen unheld in two sweeps in a row go back, so a claim on its
        way to a worker is never touched.
        """
        unheld: set[tuple[str, bytes]] = set()
        for source in self._sources:
            found = set((await source.own_entries()) - held)
            for source_key, raw in found & self._unheld:
                if await source.release(source_key, raw):
                    self._metrics.reaped.inc()
                    log.warning("returned an orphaned claim to %s", names.display(source_key))
            unheld |= found
        self._unheld = unheld

    async def show_depths(self) -> None:
        """Rescan every source; one depth series per tracked DLQ and per kind source."""
        depths: dict[str, int] = {}
        for source in self._sources:
            await source.rescan()
            depths.update(await source.depths())
        self._depths.show(depths)
        self._depths.show_waiting(sum(source.waiting() for source in self._sources))

    async def _leave_checks(self, source: Source, forward: Forward, stop: asyncio.Event) -> None:
        """Every `leave_check_s`: held jobs gone from the store get their resolve queued."""
        assert source.leave_check_s is not None
        while not stop.is_set():
            try:
                queued = await source.check_leaving(forward)
                for reason, count in queued.items():
                    self._metrics.resolves_queued.labels(names.display(source.name), reason).inc(count)
                if queued:
                    log.info("source %s: %d alerted jobs left the store by hand; resolves queued",
                             source.name, queued.total())
            except Exception as exc:  # the next check goes on; claim errors show on /healthz
                log.warning("source %s: leave check failed (%s)", source.name, why_unreadable(exc))
            await pause(stop, source.leave_check_s)

    async def _every(self, interval: float, job: Callable[[], Awaitable[object]], stop: asyncio.Event) -> None:
        await every(interval, job, stop, what=f"upkeep task {getattr(job, '__name__', job)}",
                    on_success=lambda: self._health.set("redis", Status.OK), on_redis_error=self._redis_down)


async def pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return
