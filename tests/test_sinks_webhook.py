"""Signed webhooks as a receiver sees them: body, headers, signatures, stable ids on retry."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable

import redis.asyncio as aioredis
from standardwebhooks import Webhook

from bridge.settings import Settings
from bridge.sinks.signing import header_key, verify
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, dispatch, make_alert, open_delivery

WHSEC = "whsec_" + base64.b64encode(b"incidents-api-signing-key-0001!!").decode()
OLD = "plain-old-secret"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0}
ENVELOPE = ("queue", "job_id", "job_name", "attempts", "correlation_id", "last_error",
            "first_failed_at", "payload_excerpt", "source_key")


def hook(url: str, secret: str = WHSEC) -> dict[str, object]:
    return {"name": "incidents-api", "type": "webhook", "url": url, "secret": secret}


async def test_receiver_verifies_body_and_both_signatures(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[hook(f"{base}/api/dlq", f"{WHSEC} {OLD}")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "delivered"
    [request] = receiver.requests
    headers, body = request.headers, request.body
    payload = Webhook(WHSEC).verify(body, headers)  # the official Standard Webhooks library
    assert Webhook(OLD.encode()).verify(body, headers) == payload  # rotation: the old secret too
    plain = "sha256=" + hmac.new(OLD.encode(), body, hashlib.sha256).hexdigest()
    assert plain in headers["x-signature"].split()
    assert verify(body, headers, WHSEC) == payload
    assert headers["idempotency-key"] == "orders:job-1"
    assert headers["webhook-id"] == payload["id"] and payload["id"].startswith("msg_")
    assert payload["type"] == "dlq.alert" and payload["summary_source"] == "fallback"
    assert set(payload["summary"]) == {"title", "severity", "likely_cause", "next_steps", "runbook_hint", "repairs"}
    alert = make_alert()
    for name in ENVELOPE:
        assert payload[name] == getattr(alert.dead_letter, name), name


async def test_retries_carry_the_same_idempotency_key_and_webhook_id(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver(script=[Reply(503), Reply(408), Reply(502)])
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[hook(f"{base}/api/dlq")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "delivered" and result.attempts == 4
    assert len({r.headers["idempotency-key"] for r in receiver.requests}) == 1
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1
    assert len({r.body for r in receiver.requests}) == 1
    for request in receiver.requests:
        Webhook(WHSEC).verify(request.body, request.headers)


async def test_410_gone_is_permanent(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    receiver = Receiver(default=Reply(410, body="gone"))
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[hook(f"{base}/api/dlq")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "undeliverable" and result.status == 410
    assert len(receiver.requests) == 1
    [raw] = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    assert WHSEC.encode() not in raw
    assert json.loads(raw)["body"]["type"] == "dlq.alert"


async def test_odd_ids_still_make_a_valid_header(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[hook(f"{base}/api/dlq")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert(job_id="Zürich job\r\nX-Evil: 1"))
    assert result.outcome == "delivered"
    [request] = receiver.requests
    assert "x-evil" not in request.headers
    assert request.headers["idempotency-key"] == header_key("orders:Zürich job\r\nX-Evil: 1")
    assert json.loads(request.body)["job_id"] == "Zürich job\r\nX-Evil: 1"
    assert header_key("orders:plain-1") == "orders:plain-1"
