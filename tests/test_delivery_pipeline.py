"""The real pipeline delivering to every sink type at local receivers; health and metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import redis.asyncio as aioredis

from bridge import keys
from bridge.runtime import open_runtime
from bridge.settings import Settings
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}


async def test_pipeline_delivers_to_each_routed_sink_and_reports(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    slack, pd, hook = Receiver(), Receiver(default=Reply(202)), Receiver(default=Reply(410))
    async with serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack", "type": "slack", "group_by": "none", "url": f"{s}/hook", "messages_per_second": 100},
            {"name": "pd", "type": "pagerduty", "group_by": "none", "routing_key": "rk",
             "events_url": f"{p}/v2/enqueue",
             "min_severity": "critical"},
            {"name": "api", "type": "webhook", "url": f"{h}/in", "secret": "x", "queues": ["orders*"]},
        ])
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
            health = runtime.health.snapshot()
            metrics = runtime.metrics.render().decode()
    assert sorted(json.loads(r.body)["text"].rsplit(" ", 1)[-1] for r in slack.requests) == ["m1)", "o1)"]
    assert pd.requests == [], "severity error is below the PagerDuty sink's minimum"
    assert [json.loads(r.body)["job_id"] for r in hook.requests] == ["o1"]
    assert health["sink:slack"]["status"] == "ok" and health["sink:pd"]["status"] == "ok"
    assert health["sink:api"] == {"status": "degraded", "detail": "undeliverable: HTTP 410"}
    assert 'dlq_bridge_deliveries_total{outcome="delivered",sink="slack"} 2.0' in metrics
    assert 'dlq_bridge_deliveries_total{outcome="undeliverable",sink="api"} 1.0' in metrics
    assert 'dlq_bridge_delivery_attempts_total{outcome="permanent",sink="api"} 1.0' in metrics
    assert "dlq_bridge_undeliverable_depth 1.0" in metrics
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 1, "an undeliverable sink still finishes the entry"
    assert await aredis.llen(keys.UNDELIVERABLE) == 1
