"""Identity survives size: entries over `max_parse_bytes` are alerted under their own job id.

The real runtime drains real Redis into a signed webhook, PagerDuty and the console (local
receivers): the Idempotency-Key, the PagerDuty dedup_key and the console card all name the job,
read by a streamed parse of the entry's top-level fields (bridge/intake/streamed_fields.py).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis

from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

SECRET = "hunter2-oversized-secret"
MB = 1024 * 1024


def sinks(pd: str, hook: str) -> list[dict[str, Any]]:
    return [
        {"name": "console", "type": "console"},
        {"name": "pd", "type": "pagerduty", "routing_key": "R" * 32, "events_url": f"{pd}/v2/enqueue",
         "events_per_minute": 60000, "group_by": "none"},  # per job: the dedup_key is the job id
        {"name": "hook", "type": "webhook", "url": f"{hook}/dlq", "secret": "s3cret-signing-key"},
    ]


def two_mb_entry() -> bytes:
    """The fields first, then 2 MB of payload: the read stops after the error."""
    return json.dumps({
        "job_id": "import-2mb", "job_name": "ImportCsv", "queue": "imports", "attempts": 4,
        "last_error": f"CsvError: row 88121 malformed (password={SECRET})",
        "payload": {"rows": ["r" * 1000] * 2100},
    }).encode()


def twenty_mb_entry() -> bytes:
    """20 MB of nested payload before the fields, and a 3 MB error: the read streams through."""
    return json.dumps({
        "payload": [{"row": i, "cells": ["c" * 200] * 10} for i in range(9_000)],
        "id": 20_000_001,
        "class": "NightlyExport",
        "retry_count": 7,
        "error": "TimeoutError: " + "e" * 3 * MB,
        "queue": "exports",
    }).encode()


async def drain_all(settings: Settings, out: io.StringIO) -> None:
    async with open_runtime(settings, stdout=out) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 180)


async def test_2_mb_and_20_mb_entries_alert_under_their_own_job_ids(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    small, big = two_mb_entry(), twenty_mb_entry()
    assert 2 * MB < len(small) < 3 * MB and 20 * MB < len(big) < 30 * MB
    await aredis.lpush("dead_letter:imports", small)
    await aredis.lpush("dead_letter:exports", big)
    pd, hook, out = Receiver(default=Reply(status=202)), Receiver(), io.StringIO()
    async with serve(pd.app) as p, serve(hook.app) as h:
        await drain_all(make_settings(sinks=sinks(p, h)), out)
    webhook = {json.loads(r.body)["job_id"]: r for r in hook.requests}
    assert set(webhook) == {"import-2mb", "20000001"}
    assert unquote(webhook["import-2mb"].headers["idempotency-key"]) == "imports:import-2mb"
    assert unquote(webhook["20000001"].headers["idempotency-key"]) == "exports:20000001"
    assert {json.loads(r.body)["dedup_key"] for r in pd.requests} == {"import-2mb", "20000001"}
    first = json.loads(webhook["import-2mb"].body)
    assert (first["job_name"], first["attempts"], first["reported_queue"]) == ("ImportCsv", 4, "imports")
    assert first["parse_error"].startswith("oversized dead letter")
    assert first["last_error"] == "CsvError: row 88121 malformed (password=[REDACTED])"
    second = json.loads(webhook["20000001"].body)
    assert (second["job_name"], second["attempts"]) == ("NightlyExport", 7)
    assert second["last_error"].startswith("TimeoutError: eee") and len(second["last_error"]) < 8300
    cards = out.getvalue()
    assert "import-2mb" in cards and "20000001" in cards and SECRET not in cards
    assert SECRET not in json.dumps([r.body.decode() for r in [*hook.requests, *pd.requests]])
    assert await aredis.lrange(keys.alerted("dead_letter:imports"), 0, -1) == [small], "archived intact"
    assert await aredis.llen(keys.alerted("dead_letter:exports")) == 1


async def test_a_quarantined_job_is_named_and_alerts_again_after_redrive_quarantine(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    """Quarantine alert `quarantined:<id>`; `redrive --quarantine`; the job's own alert is not held back."""
    from bridge.cli import main
    from bridge.intake.envelope import raw_digest

    raw = json.dumps({"job_id": "poison-7", "job_name": "Explode", "last_error": "boom"}).encode()
    await aredis.set(keys.claims("dead_letter:poison", raw_digest(raw)), 3)  # three deaths already counted
    await aredis.lpush("dead_letter:poison", raw)
    pd, hook, out = Receiver(default=Reply(status=202)), Receiver(), io.StringIO()
    async with serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(sinks=sinks(p, h))
        await drain_all(settings, out)
        assert await aredis.lrange(keys.quarantine("dead_letter:poison"), 0, -1) == [raw]
        config = str(tmp_path / "bridge.toml")  # where make_settings wrote it
        code = await asyncio.to_thread(main, ["--config", config, "redrive", "poison", "--quarantine"])
        assert code == 0
        await drain_all(settings, out)
    sent = [json.loads(r.body) for r in hook.requests]
    assert [(b["job_id"], b["job_name"]) for b in sent] == [
        ("quarantined:poison-7", "Explode"), ("poison-7", "Explode")]
    assert [unquote(r.headers["idempotency-key"]) for r in hook.requests] == [
        "poison:quarantined:poison-7", "poison:poison-7"]
    assert [json.loads(r.body)["dedup_key"] for r in pd.requests] == ["quarantined:poison-7", "poison-7"]
    assert await aredis.lrange(keys.alerted("dead_letter:poison"), 0, -1) == [raw]
