"""Peers misbehaving mid-drain: sinks flapping 503/429/200, a slow, failing or garbage gateway."""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway, valid_reply
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

pytestmark = pytest.mark.failure

SOURCE = "dead_letter:flap"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "max_attempts": 40, "request_timeout_s": 2.0}


def flapping(ok: int = 200, cycles: int = 400) -> Receiver:
    """Answers 503 → 429 (Retry-After: 0) → success, over and over."""
    script = [Reply(503), Reply(429, {"Retry-After": "0"}), Reply(ok)] * cycles
    return Receiver(script=script, default=Reply(ok))


def sinks(slack: str, pd: str, hook: str) -> list[dict[str, Any]]:
    return [
        {"name": "slack", "type": "slack", "group_by": "none", "url": f"{slack}/services/T/B/X",
         "messages_per_second": 1000},
        {
            "name": "pd",
            "type": "pagerduty", "group_by": "none",
            "routing_key": "k" * 32,
            "events_url": f"{pd}/v2/enqueue",
            "events_per_minute": 60000,
        },
        {"name": "hook", "type": "webhook", "url": f"{hook}/in", "secret": "s3cret"},
    ]


async def drain(settings: Settings, timeout: float = 20) -> Runtime:
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), timeout)
        return runtime


async def test_flapping_sinks_deliver_every_entry_once_per_sink(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    count = 60
    await aredis.lpush(SOURCE, *[envelope_entry(queue="flap", job_id=f"f{i}") for i in range(count)])
    slack, pd, hook = flapping(), flapping(ok=202), flapping()
    async with serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(delivery=FAST, sinks=sinks(s, p, h), sources={"concurrency": 8})
        runtime = await drain(settings)
    assert await aredis.llen(keys.alerted(SOURCE)) == count
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    for name, receiver in (("slack", slack), ("pd", pd), ("hook", hook)):
        delivered = runtime.metrics.registry.get_sample_value(
            "dlq_bridge_deliveries_total", {"sink": name, "outcome": "delivered"}
        )
        retried = runtime.metrics.registry.get_sample_value(
            "dlq_bridge_delivery_attempts_total", {"sink": name, "outcome": "retryable"}
        )
        assert delivered == count, name
        assert retried is not None and retried >= count, f"{name} should have been retried through the flaps"
        assert len(receiver.requests) == count + retried
    hook_keys = Counter(r.headers["idempotency-key"] for r in hook.requests)
    assert set(hook_keys) == {f"flap:f{i}" for i in range(count)}
    ids_per_key: dict[str, set[str]] = {}
    for r in hook.requests:
        ids_per_key.setdefault(r.headers["idempotency-key"], set()).add(r.headers["webhook-id"])
    assert all(len(ids) == 1 for ids in ids_per_key.values()), "every retry carries the same webhook-id"
    dedup = Counter(json.loads(r.body)["dedup_key"] for r in pd.requests)
    assert set(dedup) == {f"f{i}" for i in range(count)}


@pytest.mark.parametrize(
    ("gateway", "reason"),
    [
        (FakeGateway(status=503), "http_503"),
        (FakeGateway(responder=lambda _e: "I think it broke. Sorry!"), "invalid_json"),
        (FakeGateway(latency_s=3.0), "timeout"),
    ],
    ids=["failing", "garbage", "slow"],
)
async def test_a_bad_gateway_never_stops_alerts(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, gateway: FakeGateway, reason: str
) -> None:
    count = 40
    await aredis.lpush(
        SOURCE, *[envelope_entry(queue="flap", job_id=f"g{i}", job_name=f"job{i}") for i in range(count)]
    )
    hook = Receiver()
    async with serve(gateway.app()) as gw, serve(hook.app) as h:
        settings = make_settings(
            openclaw={"url": gw, "timeout_s": 0.5, "breaker_failures": 3, "breaker_cooldown_s": 60},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{h}/in", "secret": "s"}],
            sources={"concurrency": 8},
            environ={"OPENCLAW_GATEWAY_TOKEN": "t"},
        )
        runtime = await drain(settings)
    assert await aredis.llen(keys.alerted(SOURCE)) == count
    sent = [json.loads(r.body) for r in hook.requests]
    assert len(sent) == count
    assert all(s["summary_source"] == "fallback" for s in sent)
    reasons = Counter(k[1]["reason"] for k in _summary_samples(runtime))
    assert reasons[reason] >= 3 and reasons["circuit_open"] >= 1, reasons
    assert gateway.calls < count / 2, "the breaker must stop calling a broken gateway"
    assert runtime.metrics.registry.get_sample_value("dlq_bridge_gateway_circuit_open") == 1


async def test_a_wrong_schema_gateway_never_opens_the_breaker(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """Schema failures are reply quality, not availability: they fall back but never trip it."""
    count = 20
    gateway = FakeGateway(responder=lambda _e: json.dumps({"title": "x", "severity": "panic"}))
    await aredis.lpush(
        SOURCE, *[envelope_entry(queue="flap", job_id=f"s{i}", job_name=f"job{i}") for i in range(count)]
    )
    hook = Receiver()
    async with serve(gateway.app()) as gw, serve(hook.app) as h:
        settings = make_settings(
            openclaw={"url": gw, "timeout_s": 0.5, "breaker_failures": 3, "breaker_cooldown_s": 60},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{h}/in", "secret": "s"}],
            sources={"concurrency": 8},
            environ={"OPENCLAW_GATEWAY_TOKEN": "t"},
        )
        runtime = await drain(settings)
    assert len(hook.requests) == count
    reasons = Counter(k[1]["reason"] for k in _summary_samples(runtime))
    assert reasons == {"schema": count}, reasons
    assert gateway.calls == count  # one per cause: the circuit never opened
    assert runtime.metrics.registry.get_sample_value("dlq_bridge_gateway_circuit_open") == 0


def _summary_samples(runtime: Runtime) -> list[tuple[str, dict[str, str]]]:
    out = []
    for metric in runtime.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "dlq_bridge_summaries_total" and s.value:
                out.extend([(s.name, s.labels)] * int(s.value))
    return out


async def test_a_garbage_then_healthy_gateway_serves_valid_summaries(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    replies = iter(["```json\n{oops", *[None] * 100])

    def responder(envelope: dict[str, Any]) -> str:
        reply = next(replies)
        return reply if reply is not None else valid_reply(envelope)

    gateway = FakeGateway(responder=responder)
    await aredis.lpush(SOURCE, *[envelope_entry(queue="flap", job_id=f"h{i}", job_name=f"n{i}") for i in range(5)])
    hook = Receiver()
    async with serve(gateway.app()) as gw, serve(hook.app) as h:
        settings = make_settings(
            openclaw={"url": gw, "max_concurrency": 1},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{h}/in", "secret": "s"}],
            environ={"OPENCLAW_GATEWAY_TOKEN": "t"},
        )
        await drain(settings)
    sources = Counter(json.loads(r.body)["summary_source"] for r in hook.requests)
    assert sources == {"fallback": 1, "openclaw": 4}
