"""The memory plan: `check` and the console project what the bridge will keep in Redis at the current
rate and settings, and warn before it passes a share of maxmemory (docs/operations.md, "Redis memory:
planning")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.commands.check_memory import check_redis_memory
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import footprint
from tests.conftest import envelope_entry
from tests.test_failure_redis_memory import MaxmemoryRedis

ENTRIES = 240


@pytest.fixture
def small_redis() -> Iterator[MaxmemoryRedis]:
    server = MaxmemoryRedis("--maxmemory", "32mb", "--maxmemory-policy", "noeviction")
    yield server
    server.stop()


def settings_on(server: MaxmemoryRedis, archive_max: int) -> Settings:
    return Settings(redis={"url": server.url, "consumer_id": "plan-1"}, sources={"archive_max": archive_max})


async def drain(settings: Settings, server: MaxmemoryRedis) -> None:
    server.client.lpush("dead_letter:orders", *(envelope_entry(job_id=f"j{i}") for i in range(ENTRIES)))
    async with open_runtime(settings) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)


def plan_row(rows: list[tuple[str, str, str, str]]) -> tuple[str, str]:
    [(_name, _target, status, detail)] = [r for r in rows if r[0] == "redis memory plan"]
    return status, detail


async def test_check_warns_when_the_projection_passes_the_share_of_maxmemory(
    small_redis: MaxmemoryRedis, tmp_path: Path
) -> None:
    """240 dead letters in the last hour: 5,760 a day into one DLQ fill a 10,000-entry archive within
    the month (≈ 42 MB: past 70 % of 32 MB); with 1,000 kept the same rate needs ≈ 4 MB."""
    big = settings_on(small_redis, 10_000)
    await drain(big, small_redis)
    warned = plan_row(await check_redis_memory(big, 5.0))
    room = plan_row(await check_redis_memory(settings_on(small_redis, 1_000), 5.0))
    assert warned[0] == "warn", warned
    assert "0.07 dead letters/s over 1 sources" in warned[1] and "more than 70% of maxmemory" in warned[1]
    assert "sources.archive_max (10,000) per DLQ" in warned[1]
    assert room[0] == "ok" and "about 4 MB after 30 days" in room[1], room


def test_the_defaults_keep_a_month_at_10_per_second_within_1_gb() -> None:
    """docs/operations.md's planning table: 10 dead letters a second for 30 days, over 20 DLQs with the
    default (console) sink, and over 10 DLQs with the README's sinks (Slack and PagerDuty grouped, a
    webhook for every job)."""
    per_day = 10 * footprint.DAY_S
    console_only = Settings().retention()
    readme: Any = Settings(sinks=[
        {"name": "slack-ops", "type": "slack", "url": "http://127.0.0.1:9/s"},
        {"name": "pagerduty", "type": "pagerduty", "routing_key": "r" * 32},
        {"name": "incidents-api", "type": "webhook", "url": "http://127.0.0.1:9/h", "secret": "s"},
    ]).retention()
    assert (readme.ledger_sinks, readme.grouping_sinks) == (1, 2)
    for kept, sources in ((console_only, 20), (readme, 10)):
        need = footprint.total(footprint.project(footprint.Load(per_day=per_day, sources=sources), kept, 30))
        assert need < 1e9, (sources, need)


def test_the_plan_counts_the_causes_the_open_groups_show() -> None:
    """A failure a minute keeps ~240 groups open per grouping sink (4 h each): the plan sizes the
    groups for 1,440 causes a day, not the quiet default of 50."""
    kept = Settings(sinks=[{"name": "slack-ops", "type": "slack", "url": "http://127.0.0.1:9/s"}]).retention()
    quiet = footprint.plan(864_000, 5, kept)
    busy = footprint.plan(864_000, 5, kept, open_groups=240)
    groups = {p.name: p.bytes for p in quiet}["groups"], {p.name: p.bytes for p in busy}["groups"]
    assert groups[1] == pytest.approx(groups[0] * 1440 / 50, rel=0.01)
