"""Structures bounded by a count, each filled past its cap (docs/design.md, "Every key": the lifetime
column). The archive, the entry records and the undeliverable list have theirs in
tests/test_quarantine_kept.py, tests/test_console_api.py and tests/test_delivery_pipeline.py; groups
in tests/test_bounded_groups.py; the search index in tests/test_console_search.py."""

from __future__ import annotations

import redis.asyncio as aioredis

from bridge.stores.audit import AuditLog
from bridge.stores.cursor import Cursor, Position


async def test_the_audit_list_keeps_its_newest_records(aredis: aioredis.Redis) -> None:
    audit = AuditLog(aredis, keep=20)
    for i in range(50):
        await audit.append("alice", "redrive", f"entry-{i}", "ok")
    kept = await audit.recent(100)
    assert [r.target for r in kept] == [f"entry-{i}" for i in range(49, 29, -1)]


async def test_the_held_jobs_of_a_watched_store_keep_the_newest_deaths(aredis: aioredis.Redis) -> None:
    cursor = Cursor(aredis, "sidekiq")
    for i in range(60):
        position = Position(score=str(1_700_000_000 + i), member_id=f"jid-{i:03d}")
        assert await cursor.claim(position, 1_000)
        await cursor.finish_and_hold(position, '{"sinks": ["pagerduty"]}', max_held=25)
    held: list[Position] = []
    scan = 0
    while True:
        scan, page = await cursor.held_page(scan, 100)
        held += page
        if scan == 0:
            break
    assert sorted(p.member_id for p in held) == [f"jid-{i:03d}" for i in range(35, 60)]
    assert await cursor.held_note("jid-000") is None and await cursor.held_note("jid-059") is not None
