"""The fleet: every live replica's heartbeat, with the release and record formats it announces.

    dlq_bridge:consumer:<consumer>   string  `{"host","pid","at","version","reads"}`, TTL
                                             `sources.heartbeat_ttl_s` (written by `ClaimStore.beat`)

0.1.0 wrote `{"host","pid","at"}` only: a heartbeat without `reads` is a replica that reads
record format 1 (bridge.core.formats). Read by a SCAN (every master on a cluster) and one MGET per
batch, at most every `sources.heartbeat_interval_s`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis.asyncio as redis

from bridge.core import names
from bridge.core.formats import FIRST
from bridge.stores import keys

SCAN_COUNT = 1000


@dataclass(frozen=True)
class Replica:
    """One live replica as its heartbeat announces it."""

    consumer: str
    version: str  # "" for a release that announces none (0.1.0)
    reads: int  # the newest record format it reads
    host: str = ""
    pid: int = 0


async def live_replicas(client: redis.Redis) -> list[Replica]:
    """Every replica whose heartbeat has not expired, by consumer id."""
    found = [names.text(k) async for k in client.scan_iter(match=keys.HEARTBEAT_MATCH, count=SCAN_COUNT,
                                                             _type="string")]
    replicas = []
    for key in sorted(set(found)):
        consumer = keys.consumer_of_heartbeat(key)
        raw = await client.get(key)
        if consumer is not None and raw is not None:
            replicas.append(_replica(consumer, names.text(raw)))
    return replicas


def _replica(consumer: str, raw: str) -> Replica:
    try:
        info = json.loads(raw)
    except ValueError:
        info = {}
    if not isinstance(info, dict):
        info = {}
    reads = info.get("reads")
    pid = info.get("pid")
    return Replica(
        consumer,
        str(info.get("version") or ""),
        reads if isinstance(reads, int) and reads >= FIRST else FIRST,
        str(info.get("host") or ""),
        pid if isinstance(pid, int) else 0,
    )
