"""A quarantined entry is never dropped: the quarantine list is not trimmed, whatever the caps.

Every cap the bridge has is set to 1 (`sources.archive_max`, `delivery.undeliverable_max`), the
quarantine list already holds entries of an earlier run, and 60 more are quarantined (their return
counters planted at `sources.quarantine_after`), while the receiver refuses every alert (400, so each
quarantine alert becomes an undeliverable record, trimmed to one). All 80 stay, byte for byte.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable

import redis.asyncio as aioredis

from bridge.core.claimed import entry_digest
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

SOURCE = "dead_letter:kept"


async def test_a_quarantine_list_filled_past_every_cap_keeps_every_entry(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    earlier = [json.dumps({"job_id": f"old-{i}"}).encode() for i in range(20)]
    await aredis.lpush(keys.quarantine(SOURCE), *earlier)
    poison = [json.dumps({"job_id": f"q-{i}", "last_error": f"crash {i}"}).encode() for i in range(60)]
    healthy = [json.dumps({"job_id": f"ok-{i}"}).encode() for i in range(5)]
    for raw in poison:
        await aredis.set(keys.claims(SOURCE, entry_digest(raw)), 1)  # died holding it once already
    await aredis.lpush(SOURCE, *poison, *healthy)
    refusing = Receiver(default=Reply(400))
    async with serve(refusing.app) as base:
        settings = make_settings(
            sources={"archive_max": 1, "quarantine_after": 1},
            delivery={"undeliverable_max": 1, "max_attempts": 1},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{base}/in", "secret": "s"}],
        )
        async with open_runtime(settings, stdout=io.StringIO()) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)
    kept = await aredis.lrange(keys.quarantine(SOURCE), 0, -1)
    assert sorted(kept) == sorted(earlier + poison), f"{len(kept)} of {len(earlier) + len(poison)} kept"
    assert await aredis.llen(SOURCE) == 0
    assert await aredis.llen(keys.alerted(SOURCE)) == 1, "the archive was trimmed to its cap"
    assert await aredis.llen(keys.UNDELIVERABLE) == 1, "so were the undeliverable records"
    quarantine_alerts = [r for r in refusing.requests if "Quarantined" in r.body.decode()]
    assert len(quarantine_alerts) == len(poison), "each quarantined entry was alerted (and refused)"
