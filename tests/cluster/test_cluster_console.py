"""The console on a Redis Cluster (tests/cluster/conftest.py): reads, the sources view with kinds,
the gateway gate, and redrive, whose DLQ and work queue lie in two slots."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis.asyncio as aioredis

from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.test_console_api import (
    AUTH,
    rig,
    test_a_silence_stops_slack_and_pagerduty_but_not_webhooks_until_it_expires,
    test_groups_respect_silences_show_members_and_redrive_whole,
    test_reads_show_the_real_state,
    test_redrive_moves_the_job_back_resolves_and_is_audited,
    test_retry_and_discard_undeliverable,
)
from tests.test_console_service import test_every_source_with_its_kind_depth_and_archive
from tests.test_gate_snapshot import test_the_console_reads_the_fleet_gate_as_the_replicas_left_it

__all__ = [
    "test_a_silence_stops_slack_and_pagerduty_but_not_webhooks_until_it_expires",
    "test_every_source_with_its_kind_depth_and_archive",
    "test_groups_respect_silences_show_members_and_redrive_whole",
    "test_reads_show_the_real_state",
    "test_redrive_moves_the_job_back_resolves_and_is_audited",
    "test_retry_and_discard_undeliverable",
    "test_the_console_reads_the_fleet_gate_as_the_replicas_left_it",
]


async def test_a_console_redrive_also_finishes_what_a_killed_redrive_left_in_staging(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    dlq, work = "dead_letter:orders", "orders"
    assert keys.key_slot(dlq.encode()) != keys.key_slot(work.encode()), "moved through the staging list"
    await aredis.lpush(keys.redrive_staging(dlq), json.dumps({"job_id": "left-by-a-kill", "attempts": 0}))
    await aredis.lpush(dlq, envelope_entry(job_id="o1", attempts=5))
    async with rig(make_settings) as r:
        await r.drain()
        entry_id = (await r.api.get("/api/v1/entries", params={"source": dlq})).json()["entries"][0]["id"]
        done = await r.api.post("/api/v1/entry/redrive", params={"source": dlq, "id": entry_id}, headers=AUTH)
    assert done.status_code == 200 and "an interrupted redrive left" in done.json()["message"]
    moved = [json.loads(raw)["job_id"] for raw in await aredis.lrange(work, 0, -1)]
    assert moved == ["o1", "left-by-a-kill"], "the leftover first (it is older), then the entry"
    assert await aredis.llen(keys.redrive_staging(dlq)) == 0
