"""Delivery end to end at real receivers: Retry-After, retries, undeliverable, isolation, ledger."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from bridge.core.health import Status
from bridge.core.models import Severity
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, dispatch, make_alert, open_delivery, sample
from tests.support.redis_server import free_port

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 5}
SLACK_SECRET = "services/T000/B000/XXXXSECRETXXXX"


def webhook(name: str, url: str, **extra: object) -> dict[str, object]:
    return {"name": name, "type": "webhook", "url": url, "secret": "s3cret", **extra}


def slack(name: str, base: str, **extra: object) -> dict[str, object]:
    return {"name": name, "type": "slack", "url": f"{base}/{SLACK_SECRET}", "messages_per_second": 100, **extra}


async def test_429_retry_after_makes_the_next_attempt_wait(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver(script=[Reply(429, {"Retry-After": "2"}, body="rate_limited")])
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[slack("slack", base)])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "delivered" and result.attempts == 2
    [gap] = receiver.gaps()
    assert gap >= 2.0, f"next attempt came after {gap:.3f}s, Retry-After said 2"


async def test_503_then_success_delivers_exactly_once(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver(script=[Reply(503)])
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[webhook("api", f"{base}/in")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
            assert d.health.get("sink:api") is not None
            assert d.health.get("sink:api").status is Status.OK  # type: ignore[union-attr]
    assert result.outcome == "delivered" and result.attempts == 2
    assert [r.headers["idempotency-key"] for r in receiver.requests] == ["orders:job-1"] * 2
    assert sample(d.metrics, "dlq_bridge_delivery_attempts_total", sink="api", outcome="retryable") == 1
    assert sample(d.metrics, "dlq_bridge_delivery_attempts_total", sink="api", outcome="ok") == 1
    assert sample(d.metrics, "dlq_bridge_deliveries_total", sink="api", outcome="delivered") == 1
    assert sample(d.metrics, "dlq_bridge_delivery_seconds_count", sink="api") == 1
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    assert await aredis.exists(keys.delivered("api", "orders:job-1", "0123456789abcdef")) == 1


async def test_400_lands_in_undeliverable_after_one_attempt(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = Receiver(default=Reply(400, body="invalid_blocks"))
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[slack("slack", base)])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "undeliverable" and result.attempts == 1
    assert len(receiver.requests) == 1
    [raw] = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    record = json.loads(raw)
    assert record["sink"] == "slack" and record["sink_type"] == "slack"
    assert record["status"] == 400 and "invalid_blocks" in record["error"]
    assert record["idempotency_key"] == "orders:job-1" and record["attempts"] == 1
    assert record["queue"] == "orders" and record["job_id"] == "job-1"
    assert record["raw_digest"] == "0123456789abcdef"
    assert record["body"]["blocks"] and record["alert"]["dead_letter"]["job_id"] == "job-1"
    assert "XXXXSECRETXXXX" not in raw.decode()
    assert "XXXXSECRETXXXX" not in caplog.text
    assert sample(d.metrics, "dlq_bridge_undeliverable_depth") == 1
    assert sample(d.metrics, "dlq_bridge_deliveries_total", sink="slack", outcome="undeliverable") == 1
    check = d.health.get("sink:slack")
    assert check is not None and check.status is Status.DEGRADED and "HTTP 400" in check.detail
    assert not d.health.failing()


async def test_exhausted_retries_land_in_undeliverable(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver(default=Reply(503))
    async with serve(receiver.app) as base:
        settings = make_settings(delivery={**FAST, "max_attempts": 3}, sinks=[webhook("api", f"{base}/in")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "undeliverable" and result.attempts == 3 and result.status == 503
    assert len(receiver.requests) == 3
    assert json.loads((await aredis.lrange(keys.UNDELIVERABLE, 0, -1))[0])["attempts"] == 3


@pytest.mark.parametrize("dead", ["nothing-listening", "hangs"])
async def test_a_dead_sink_does_not_delay_a_healthy_one(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, dead: str
) -> None:
    healthy = Receiver()
    hanging = Receiver(default=Reply(503, delay_s=1.0))
    async with serve(healthy.app) as good_base, serve(hanging.app) as hang_base:
        dead_url = f"http://127.0.0.1:{free_port()}/in" if dead == "nothing-listening" else f"{hang_base}/in"
        delivery = {"base_delay_s": 0.2, "max_delay_s": 0.4, "request_timeout_s": 0.5, "max_attempts": 3}
        settings = make_settings(delivery=delivery, sinks=[
            webhook("dead", dead_url), webhook("good", f"{good_base}/in")])
        async with open_delivery(settings, aredis) as d:
            task = asyncio.create_task(dispatch(d.dispatcher, make_alert()))
            while not healthy.requests and not task.done():
                await asyncio.sleep(0.005)
            dead_attempts_then, dead_done_then = len(hanging.requests), task.done()
            dead_recorded_then = await aredis.llen(keys.UNDELIVERABLE)
            results = {r.sink: r.outcome for r in await task}
    assert results == {"dead": "undeliverable", "good": "delivered"}
    # Order, not speed: the healthy sink's request came while the dead sink was still on its
    # first attempt (before its first timeout), long before its three attempts were used up.
    assert healthy.requests and not dead_done_then, "the healthy sink was not held until the dead one gave up"
    assert dead_attempts_then <= 1, f"the healthy sink waited for {dead_attempts_then} dead attempts"
    assert dead_recorded_then == 0, "the healthy sink was not held until the dead one was recorded undeliverable"
    if dead == "hangs":
        assert len(hanging.requests) == 3, "the hanging sink used its timeouts and retries"
        assert healthy.requests[0].at < hanging.requests[1].at, "before the dead sink's first timeout"


async def test_same_alert_twice_is_sent_once_per_sink(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    a, b = Receiver(), Receiver()
    async with serve(a.app) as base_a, serve(b.app) as base_b:
        settings = make_settings(delivery=FAST, sinks=[webhook("a", f"{base_a}/in"), slack("b", base_b)])
        async with open_delivery(settings, aredis) as d:
            first = await dispatch(d.dispatcher, make_alert())
            second = await dispatch(d.dispatcher, make_alert())
            changed = await dispatch(d.dispatcher, make_alert(raw_digest="fedcba9876543210"))
    assert sorted(r.outcome for r in first) == ["delivered", "delivered"]
    assert sorted(r.outcome for r in second) == ["duplicate", "duplicate"]
    assert sorted(r.outcome for r in changed) == ["delivered", "delivered"], "a new raw entry is a new alert"
    assert len(a.requests) == 2 and len(b.requests) == 2
    assert sample(d.metrics, "dlq_bridge_deliveries_total", sink="a", outcome="duplicate") == 1
    ttl = await aredis.ttl(keys.delivered("a", "orders:job-1", "0123456789abcdef"))
    assert 0 < ttl <= settings.delivery.ledger_ttl_s


async def test_replay_after_partial_success_resends_only_to_the_failed_sink(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    good, flaky = Receiver(), Receiver(script=[Reply(503)] * 2)
    async with serve(good.app) as base_good, serve(flaky.app) as base_flaky:
        sinks = [webhook("good", f"{base_good}/in"), webhook("flaky", f"{base_flaky}/in")]
        settings = make_settings(delivery={**FAST, "max_attempts": 2}, sinks=sinks)
        async with open_delivery(settings, aredis) as d:
            first = {r.sink: r.outcome for r in await dispatch(d.dispatcher, make_alert())}
            again = {r.sink: r.outcome for r in await dispatch(d.dispatcher, make_alert())}
    assert first == {"good": "delivered", "flaky": "undeliverable"}
    assert again == {"good": "duplicate", "flaky": "delivered"}
    assert len(good.requests) == 1 and len(flaky.requests) == 3


async def test_routing_by_min_severity_and_queue_globs(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[
            webhook("pay", f"{base}/pay", queues=["payments*"]),
            webhook("crit", f"{base}/crit", min_severity="critical"),
        ])
        async with open_delivery(settings, aredis) as d:
            assert await dispatch(d.dispatcher, make_alert(queue="orders")) == []
            await dispatch(d.dispatcher, make_alert(queue="payments-eu"))
            await dispatch(d.dispatcher, make_alert(queue="orders", job_id="j2", severity=Severity.CRITICAL))
            both = make_alert(queue="payments", severity=Severity.CRITICAL)
            assert [r.sink.name for r in d.dispatcher.routed(both)] == ["pay", "crit"]
    assert sorted(r.path for r in receiver.requests) == ["crit", "pay"]


async def test_redis_down_while_recording_raises_so_the_entry_is_kept(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    broken = aioredis.Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[webhook("api", f"{base}/in")])
        async with open_delivery(settings, broken) as d:
            with pytest.raises(RedisError):
                await dispatch(d.dispatcher, make_alert())
    await broken.aclose()
    assert receiver.requests == [], "without the ledger check nothing is sent"
