"""`dlq-bridge check` rows for the fleet: each live replica's release and record formats, the format
the fleet writes, and queued items of a newer format waiting for a newer replica (a rollout must
wait for them: docs/operations.md, "Upgrades")."""

from __future__ import annotations

import asyncio

import redis.asyncio as redis

from bridge.commands.common import open_redis
from bridge.core.formats import READS
from bridge.settings import Settings
from bridge.stores.fleet import Replica, live_replicas
from bridge.stores.sink_queue import SinkQueue

OK, WARN = "ok", "warn"
Row = tuple[str, str, str, str]


async def check_fleet(settings: Settings, probe_s: float) -> list[Row]:
    """(component, target, status, detail) rows; none when Redis is unreachable (its own row says so)."""
    try:
        async with open_redis(settings) as client:
            replicas = await asyncio.wait_for(live_replicas(client), probe_s)
            newer = await asyncio.wait_for(_newer_items(client, settings), probe_s)
    except Exception:  # the bridge's Redis: already reported by its own row
        return []
    if not replicas and not newer:
        return []  # no replica running: nothing to say about the fleet
    rows: list[Row] = [("fleet", r.consumer, OK, _describe(r)) for r in replicas]
    writes = min([READS, *(r.reads for r in replicas)])
    mixed = len({r.reads for r in replicas}) > 1
    rows.append(("fleet", "record format", WARN if mixed else OK,
                 f"the fleet writes format {writes}: the newest every live replica reads"
                 + (" (releases side by side: a rollout in progress)" if mixed else "")))
    for sink, count in sorted(newer.items()):
        rows.append(("fleet", sink, WARN, f"{count} items of a newer format wait for a newer replica: keep one "
                     "running until this is 0"))
    return rows


def _describe(replica: Replica) -> str:
    release = replica.version or "0.1.0 or older (announces no version)"
    where = f" on {replica.host} pid {replica.pid}" if replica.host else ""
    return f"{release}, reads record formats 1-{replica.reads}{where}"


async def _newer_items(client: redis.Redis, settings: Settings) -> dict[str, int]:
    found = {}
    for sink in settings.effective_sinks():
        stats = await SinkQueue(client, sink.name).stats()
        if stats.newer:
            found[sink.name] = stats.newer
    return found



