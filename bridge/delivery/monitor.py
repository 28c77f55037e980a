"""Sink queue depth and oldest age: metrics, and a `degraded` check on /healthz when stale.

A sink whose oldest queued alert waits longer than `delivery.queue_stale_s`
shows `sink_queue:<sink>` as degraded (the bridge still drains its DLQs;
that sink lags). Read from Redis, so the figures are fleet-wide
(docs/design.md, section 5b).
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.core.health import Health, Status
from bridge.core.items import now_ms
from bridge.core.metrics import Metrics
from bridge.stores.sink_queue import QueueStats, SinkQueue


class QueueMonitor:
    def __init__(self, queues: Sequence[SinkQueue], metrics: Metrics, health: Health, stale_s: float) -> None:
        self._queues = list(queues)
        self._metrics = metrics
        self._health = health
        self._stale_s = stale_s

    async def check(self) -> dict[str, QueueStats]:
        """Read every sink queue once; set the gauges and the health checks."""
        found: dict[str, QueueStats] = {}
        at = now_ms()
        for queue in self._queues:
            stats = await queue.stats()
            found[queue.sink] = stats
            age = stats.oldest_age_s(at)
            self._metrics.sink_queue_depth.labels(queue.sink).set(stats.depth)
            self._metrics.sink_queue_oldest_age.labels(queue.sink).set(age)
            self._report(queue.sink, stats, age)
            self._metrics.newer_format_items.labels(queue.sink).set(stats.newer)
        self._report_newer(found)
        return found

    def _report_newer(self, found: dict[str, QueueStats]) -> None:
        """`formats` on /healthz: degraded while items of a newer record format wait (a rollback in
        progress: keep a replica of the newer release running until they are delivered)."""
        waiting = {sink: stats.newer for sink, stats in found.items() if stats.newer}
        if waiting:
            where = ", ".join(f"{sink} {n}" for sink, n in sorted(waiting.items()))
            detail = f"{sum(waiting.values())} items of a newer format wait for a newer replica ({where})"
            self._health.set("formats", Status.DEGRADED, detail)
        else:
            self._health.set("formats", Status.OK)

    def _report(self, sink: str, stats: QueueStats, age: float) -> None:
        name = f"sink_queue:{sink}"
        if age > self._stale_s:
            detail = f"{stats.depth} queued, oldest {age:.0f}s old (threshold {self._stale_s:.0f}s)"
            self._health.set(name, Status.DEGRADED, detail)
        else:
            self._health.set(name, Status.OK)
