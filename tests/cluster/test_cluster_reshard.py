"""A DLQ's slot moves to another master while a bridge drains it (MOVED, ASK and TRYAGAIN).

The slot is migrated key by key, with pauses, so for a while its keys are split between
the two masters: commands get ASK (a key already moved), TRYAGAIN (a script or LMOVE whose
keys are on both sides), then MOVED once the slot belongs to the target. The bridge rides
through without a restart: every entry archived exactly once and alerted, and nothing
recorded as undeliverable. (This test found redis-py's cluster client closing connections
other tasks were reading from; see `ClusterUnavailableError`.)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import pytest
from redis.asyncio.cluster import RedisCluster

from bridge.stores import keys
from tests.support.bridge_process import kill9, remaining, start_bridge, wait_healthz, write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_server import free_port

pytestmark = [pytest.mark.failure, pytest.mark.slow]

DLQ = "dead_letter:moving"
ENTRIES = 400


@pytest.mark.timeout(240)  # the migration, then the drain's own 60 s: it, not pytest, decides
async def test_a_dlq_slot_migrated_mid_drain_loses_and_doubles_nothing(
    local_cluster: LocalCluster, aredis: RedisCluster, tmp_path: Path
) -> None:
    await aredis.lpush(DLQ, *[json.dumps({"queue": "moving", "job_id": f"m-{i}", "last_error": f"E{i}"})
                              for i in range(ENTRIES)])
    source = local_cluster.owner(DLQ)
    target = next(p for p in local_cluster.primaries() if p != source)
    receiver = Receiver()
    async with serve(receiver.app) as base:
        port = free_port()
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port, "grace_s": 5},
            "redis": {"url": local_cluster.url, "consumer_id": "mover", "cluster": True},
            "sources": {"concurrency": 4, "poll_interval_s": 0.01, "rescan_interval_s": 0.5,
                        "heartbeat_interval_s": 0.5, "heartbeat_ttl_s": 3, "reap_interval_s": 1},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{base}/hooks", "secret": "mover-secret"}],
        })
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            await asyncio.to_thread(wait_healthz, port, proc)
            while await aredis.llen(keys.alerted(DLQ)) < 50:
                await asyncio.sleep(0.01)
            slot = keys.key_slot(DLQ.encode())
            waiting_at_start = await aredis.llen(DLQ)
            moved_keys: list[bytes] = []
            moved = await asyncio.to_thread(local_cluster.migrate_slot, slot, source, target, 0.3, moved_keys)
            drained = await drain(aredis, time.monotonic() + 60)
            assert proc.poll() is None, "the bridge kept running"
        finally:
            kill9(proc)
    assert waiting_at_start > 0, "entries were still waiting in the DLQ when its slot began to move"
    assert DLQ.encode() in moved_keys, "the DLQ itself moved while it held entries (an empty list is no key)"
    assert drained, "everything was archived and nothing left in a DLQ, processing list, outbox or sink queue"
    assert local_cluster.owner(DLQ) == target and moved >= 2
    archive = Counter(json.loads(raw)["job_id"] for raw in await aredis.lrange(keys.alerted(DLQ), 0, -1))
    assert set(archive) == {f"m-{i}" for i in range(ENTRIES)} and set(archive.values()) == {1}
    sent = {json.loads(r.body)["job_id"] for r in receiver.requests if r.status == 200}
    missing = {f"m-{i}" for i in range(ENTRIES)} - sent
    undeliverable = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    log = proc.stderr.read().decode()[-3000:] if proc.stderr else ""
    assert not missing and not undeliverable, (missing, undeliverable, log)
    print(f"\nreshard: {moved} keys of the DLQ's slot moved :{source} -> :{target} mid-drain; "
          f"{ENTRIES} archived once, {len(receiver.requests)} requests")


async def drain(client: RedisCluster, deadline: float) -> bool:
    """Until every entry is archived and nothing waits in the DLQ, a processing list, outbox or sink queue."""
    while time.monotonic() < deadline:
        if await client.llen(keys.alerted(DLQ)) >= ENTRIES and not await remaining(client, DLQ):
            return True
        await asyncio.sleep(0.1)
    return False
