"""`DeliverySupervisor`: every sink's worker, the outbox sweep and the queue monitor, run together; and
burst mode's wait until every sink queue is empty (docs/design.md, section 5b)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from bridge.core.errors import REDIS_ERRORS
from bridge.core.periodic import every
from bridge.delivery.fleet import FleetFormat
from bridge.delivery.monitor import QueueMonitor
from bridge.delivery.sink_worker import ERROR_PAUSE_S, SinkWorker
from bridge.stores.handoff import HandOff

SWEEP_EVERY_S = 5.0
OUTBOX_GRACE_S = 10.0
MONITOR_EVERY_S = 5.0

log = logging.getLogger(__name__)


class DeliverySupervisor:
    """Every sink's worker, the outbox sweep and the queue monitor, run together."""

    def __init__(
        self,
        workers: Sequence[SinkWorker],
        handoff: HandOff,
        monitor: QueueMonitor,
        start_up_report: Callable[[], Coroutine[Any, Any, object]] | None = None,
        fleet: FleetFormat | None = None,
    ) -> None:
        self.workers = {w.name: w for w in workers}
        self._fleet = fleet
        self.handoff = handoff
        self.monitor = monitor
        self._start_up_report = start_up_report

    def nudge(self, sink: str) -> None:
        worker = self.workers.get(sink)
        if worker is not None:
            worker.nudge()

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`, then let in-flight deliveries finish (the caller bounds the wait)."""
        upkeep: list[asyncio.Task[object]] = [
            asyncio.create_task(every(SWEEP_EVERY_S, lambda: self.handoff.sweep(OUTBOX_GRACE_S), stop,
                                      what="delivery upkeep")),
            asyncio.create_task(every(MONITOR_EVERY_S, self.monitor.check, stop, what="delivery upkeep")),
        ]
        if self._start_up_report is not None:
            upkeep.append(asyncio.create_task(self._start_up_report()))
        try:
            await asyncio.gather(*(w.run(stop) for w in self.workers.values()))
        finally:
            with contextlib.suppress(*REDIS_ERRORS):
                await asyncio.shield(self.handoff.flush())
                await asyncio.shield(self._leave_nothing_unreadable())
            for task in upkeep:
                task.cancel()
            await asyncio.gather(*upkeep, return_exceptions=True)

    async def _leave_nothing_unreadable(self) -> None:
        """A graceful stop beside an older replica: every outbox parcel forwarded (in the format the
        fleet writes), then every queued item and open group rewritten for the older replica
        (bridge.delivery.downgrade), so the last newer replica leaves nothing it alone could read."""
        if self._fleet is not None:
            await self._fleet.refresh()  # an older replica that became ready a moment ago counts too
        if not self.handoff.beside_older:
            return
        await self.handoff.sweep(0.0)
        for worker in self.workers.values():
            await worker.downgrade()

    async def wait_idle(self, poll_s: float = 0.05) -> None:
        """Until the outboxes are forwarded, every sink queue is empty with nothing in flight,
        and every group's unsent jobs went out in one notification (sent now, not after
        `group_wait`: burst mode ends and nothing more is coming).

        Redis outages are waited out (burst mode must not end with alerts still queued).
        A group whose notification fails is not retried here: it waits for its next
        `group_interval` in a later run, like any failed group.
        """
        swept, grouped = False, None
        while True:
            try:
                if not swept:
                    await self.handoff.sweep(0.0)
                    swept = True
                if not any(w.busy for w in self.workers.values()) and await self._all_empty():
                    if grouped is None:
                        grouped = await self._send_groups_now()
                    elif await self._groups_settled(grouped):
                        return
            except REDIS_ERRORS as exc:
                log.warning("waiting for empty sink queues: Redis unavailable (%s)", type(exc).__name__)
                await asyncio.sleep(ERROR_PAUSE_S)
            await asyncio.sleep(poll_s)

    async def _send_groups_now(self) -> dict[str, list[str]]:
        return {
            name: await w.grouper.send_now() for name, w in self.workers.items() if w.grouper is not None
        }

    async def _groups_settled(self, grouped: dict[str, list[str]]) -> bool:
        for name, groups in grouped.items():
            grouper = self.workers[name].grouper
            if groups and grouper is not None and not await grouper.settled(groups):
                return False
        return not any(w.busy for w in self.workers.values())

    async def _all_empty(self) -> bool:
        return all(s.depth == 0 for s in (await self.monitor.check()).values())
