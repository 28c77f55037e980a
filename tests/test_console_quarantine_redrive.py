"""The console's quarantine redrive: the same atomic move as `redrive --quarantine`, audited."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis.asyncio as aioredis

from bridge.settings import Settings
from bridge.stores import keys
from tests.test_console_api import AUTH, rig

DLQ = "dead_letter:orders"


async def test_quarantined_entries_go_back_to_their_dlq_and_are_audited(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    entries = [json.dumps({"job_id": f"poison-{i}"}).encode() for i in range(2)]
    for raw in entries:
        await aredis.lpush(keys.quarantine(DLQ), raw)
    async with rig(make_settings) as r:
        anonymous = await r.api.post("/api/v1/quarantine/redrive", params={"source": DLQ})
        done = await r.api.post("/api/v1/quarantine/redrive", params={"source": DLQ}, headers=AUTH)
        again = await r.api.post("/api/v1/quarantine/redrive", params={"source": DLQ}, headers=AUTH)
        audit = (await r.api.get("/api/v1/audit")).json()
    assert anonymous.status_code == 401
    assert done.status_code == 200 and done.json()["count"] == 2
    assert await aredis.lrange(DLQ, 0, -1) == list(reversed(entries)), "oldest first, byte for byte"
    assert await aredis.llen(keys.quarantine(DLQ)) == 0
    assert again.status_code == 409 and again.json()["message"].startswith("0 quarantined")
    assert [(a["who"], a["action"], a["outcome"]) for a in audit[:2]] == [
        ("alice", "redrive-quarantine", "refused"), ("alice", "redrive-quarantine", "ok")]
