"""Which record format this replica writes: the newest every live replica reads (bridge.core.formats).

Refreshed at start (before the first hand-off) and every `sources.heartbeat_interval_s`: a replica
of an older release that joins is seen within one interval, and one that left is forgotten when
its heartbeat expires (`sources.heartbeat_ttl_s`). docs/operations.md, "Upgrades".
"""

from __future__ import annotations

import logging

import redis.asyncio as redis

from bridge.core.formats import RecordFormat
from bridge.core.metrics import Metrics
from bridge.stores.fleet import Replica, live_replicas

log = logging.getLogger(__name__)


class FleetFormat:
    """Lowers or raises `formats.writes` to what the live fleet reads; logs each change."""

    def __init__(self, client: redis.Redis, formats: RecordFormat, consumer: str, metrics: Metrics) -> None:
        self._client = client
        self._formats = formats
        self._consumer = consumer
        self._metrics = metrics

    async def refresh(self) -> list[Replica]:
        replicas = await live_replicas(self._client)
        others = [r for r in replicas if r.consumer != self._consumer]
        before = self._formats.writes
        now = self._formats.follow([r.reads for r in others])
        self._metrics.record_format_written.set(now)
        if now != before:
            older = sorted(r.consumer for r in others if r.reads < self._formats.reads)
            why = f"replicas {', '.join(older)} read up to format {now}" if older else "every live replica reads it"
            log.info("writing record format %d (was %d): %s", now, before, why)
        return replicas
