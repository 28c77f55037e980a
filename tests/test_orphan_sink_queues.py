"""Alerts queued for a sink that was renamed or removed: reported at start-up and by `check`, never lost."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bridge.core.items import item_id, now_ms
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.sink_queue import SinkQueue
from tests.support.http_server import serve
from tests.support.ops import cli, write_config
from tests.support.receiver import Receiver, make_alert

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}


async def queue_for(client: aioredis.Redis, sink: str, *job_ids: str) -> None:
    """Alerts as the hand-off queues them for `sink` (the real sink queue)."""
    queue = SinkQueue(client, sink)
    for job_id in job_ids:
        alert = make_alert(job_id=job_id)
        ident = item_id(alert.severity, now_ms(), alert.idempotency_key, alert.dead_letter.raw_digest)
        await queue.put(ident, alert.model_dump_json())


def test_a_sink_queue_key_names_its_sink() -> None:
    assert keys.sink_of_queue_items(keys.sink_queue("old-hook.v1").items) == "old-hook.v1"
    for other in (keys.sink_queue("x").ready, keys.sink_queue("x").leased, "dlq_bridge:sinkq:{}:items",
                  "dlq_bridge:outbox:{x}:items", "dead_letter:orders"):
        assert keys.sink_of_queue_items(other) is None


async def test_check_warns_of_alerts_queued_for_a_removed_sink(
    tmp_path: Path, redis_url: str, aredis: aioredis.Redis
) -> None:
    await queue_for(aredis, "old-hook", "j1", "j2")
    await queue_for(aredis, "hook", "j3")  # a configured sink's queue is not an orphan
    async with serve(Receiver().app) as base:
        config = write_config(tmp_path / "b.toml", redis_url, sinks=[
            {"name": "hook", "type": "webhook", "url": f"{base}/in", "secret": "x"}])
        done = await cli(config, "check", "--json")
    rows = [r for r in json.loads(done.out) if r["component"] == "sink queue"]
    assert rows == [{"component": "sink queue", "target": "old-hook", "status": "warn",
                     "detail": "2 alert(s) queued for a sink no longer configured: configure a sink named "
                               "'old-hook' again to deliver them"}]
    assert done.code == 0, "a warning does not fail the check"


async def test_the_service_warns_at_start_and_delivers_once_the_sink_is_back(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await queue_for(aredis, "old-hook", "j1", "j2")
    receiver = Receiver()
    async with serve(receiver.app) as base:
        renamed = make_settings(delivery=FAST, sinks=[
            {"name": "new-hook", "type": "webhook", "url": f"{base}/in", "secret": "x"}])
        warning = "sink queue of 'old-hook' holds 2 alert(s) but no sink 'old-hook' is configured"
        with caplog.at_level(logging.WARNING, logger="bridge.delivery.orphans"):
            async with open_runtime(renamed) as runtime:
                stop = asyncio.Event()
                service = asyncio.create_task(runtime.pipeline.run(stop))
                for _ in range(200):  # the start-up report runs beside the sink workers
                    if warning in caplog.text:
                        break
                    await asyncio.sleep(0.05)
                stop.set()
                await asyncio.wait_for(service, 30)
        assert warning in caplog.text
        assert receiver.requests == [] and await aredis.hlen(keys.sink_queue("old-hook").items) == 2
        back = make_settings(delivery=FAST, sinks=[
            {"name": "old-hook", "type": "webhook", "url": f"{base}/in", "secret": "x"}])
        async with open_runtime(back) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
    assert sorted(json.loads(r.body)["job_id"] for r in receiver.requests) == ["j1", "j2"]
    assert await aredis.hlen(keys.sink_queue("old-hook").items) == 0
