"""Webhooks as CloudEvents, as a receiver sees them: every request parsed by the official SDK."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from standardwebhooks import Webhook

from bridge.core.errors import SinkRetryable
from bridge.core.models import Notification
from bridge.settings import Settings
from bridge.sinks.webhook import CloudFraming, WebhookSink
from tests.sinks.runtime_contract import RuntimeContract
from tests.sinks.test_sink_contract import HttpSinkContract
from tests.support.http_server import serve
from tests.support.receiver import Received, Receiver, Reply, make_alert

http_binding = pytest.importorskip("cloudevents.core.bindings.http", reason="the cloudevents SDK (test extra)")

WHSEC = "whsec_" + base64.b64encode(b"event-bus-signing-key-000000001!").decode()


def parse(request: Received):  # type: ignore[no-untyped-def]
    """The CloudEvent in a received request, by the official SDK (binary or structured, detected)."""
    return http_binding.from_http_event(http_binding.HTTPMessage(headers=request.headers, body=request.body))


def group_of(count: int) -> Notification:
    first = make_alert(job_id="job-1")
    return Notification(
        sink="bus", group_key=f"fp:{first.dead_letter.fingerprint or 'f00d'}", kind="digest", sequence=2,
        count=count, new_count=count - 1, previous_at=1_764_500_000.0, first_seen=1_764_499_990.0,
        last_seen=1_764_500_060.5, queues=["orders"], queue_counts={"orders": count},
        sample_job_ids=["job-1"], severity=first.severity, first=first, opened_at=1_764_499_990.0,
    )


async def send_all(mode: str, script: list[Reply] | None = None) -> Receiver:
    receiver = Receiver(script=script)
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = WebhookSink("bus", f"{base}/events", [WHSEC], http, 2.0, CloudFraming("dlq-bridge/test-1", mode))  # type: ignore[arg-type]
        await sink.send(make_alert(queue="orders", job_id="job-7"))
        await sink.send_group(group_of(40))
    return receiver


async def test_structured_mode_is_a_cloudevent_signed_over_the_exact_body() -> None:
    receiver = await send_all("structured")
    alert_req, group_req = receiver.requests
    assert alert_req.headers["content-type"] == "application/cloudevents+json"
    event = parse(alert_req)
    assert event.get_specversion() == "1.0"
    assert event.get_id() == "orders:job-7"  # the idempotency key
    assert event.get_source() == "dlq-bridge/test-1"
    assert event.get_type() == "dev.dlq-bridge.alert"
    assert event.get_time().isoformat() == "2026-11-30T00:00:00+00:00"  # the job's first_failed_at
    assert event.get_subject() == "orders" and event.get_extension("severity") == "error"
    data = event.get_data()
    assert data["type"] == "dlq.alert" and data["job_id"] == "job-7" and data["queue"] == "orders"
    # Standard Webhooks, unchanged: the official library verifies the bytes received
    assert Webhook(WHSEC).verify(alert_req.body, alert_req.headers)["id"] == "orders:job-7"
    assert alert_req.headers["idempotency-key"] == "orders:job-7"

    group = parse(group_req)
    assert group.get_type() == "dev.dlq-bridge.alert_group"
    assert group.get_id().startswith("group:fp:") and group.get_id().endswith(":2")
    assert group.get_time().isoformat().startswith("2025-11-30T10:54:20.5")
    assert group.get_data()["count"] == 40 and group.get_data()["type"] == "dlq.alert_group"
    Webhook(WHSEC).verify(group_req.body, group_req.headers)


async def test_binary_mode_puts_the_attributes_in_headers_and_the_data_in_the_body() -> None:
    receiver = await send_all("binary")
    alert_req = receiver.requests[0]
    assert alert_req.headers["content-type"] == "application/json"
    assert alert_req.headers["ce-id"] == "orders:job-7" and alert_req.headers["ce-specversion"] == "1.0"
    event = parse(alert_req)
    assert event.get_type() == "dev.dlq-bridge.alert" and event.get_source() == "dlq-bridge/test-1"
    assert json.loads(alert_req.body) == event.get_data()  # the body is the data, nothing else
    Webhook(WHSEC).verify(alert_req.body, alert_req.headers)
    assert parse(receiver.requests[1]).get_type() == "dev.dlq-bridge.alert_group"


async def test_an_id_with_spaces_and_non_ascii_survives_the_binary_headers() -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = WebhookSink("bus", f"{base}/e", [WHSEC], http, 2.0, CloudFraming("dlq-bridge/test-1", "binary"))
        await sink.send(make_alert(queue="commandes", job_id='tâche "7" 100%'))
    event = parse(receiver.requests[0])
    assert event.get_id() == 'commandes:tâche "7" 100%'


async def test_a_retry_sends_the_same_bytes() -> None:
    receiver = Receiver(script=[Reply(503)])
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = WebhookSink("bus", f"{base}/e", [WHSEC], http, 2.0, CloudFraming("dlq-bridge/test-1"))
        alert = make_alert()
        with pytest.raises(SinkRetryable):
            await sink.send(alert)
        await sink.send(alert)
    first, second = receiver.requests
    assert first.body == second.body and first.headers["webhook-id"] == second.headers["webhook-id"]
    assert parse(first).get_id() == parse(second).get_id() == "orders:job-1"


async def test_a_job_without_a_timestamp_has_no_time_rather_than_a_made_up_one() -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = WebhookSink("bus", f"{base}/e", [WHSEC], http, 2.0, CloudFraming("dlq-bridge/test-1"))
        await sink.send(make_alert(first_failed_at="yesterday-ish"))
    request = receiver.requests[0]
    assert "time" not in json.loads(request.body)  # optional in CloudEvents 1.0: left out, not invented
    assert parse(request).get_id() == "orders:job-1"


class TestCloudEventsWebhookContract(HttpSinkContract):
    type = "webhook"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"url": f"{base_url}/events", "secret": WHSEC, "format": "cloudevents"}

    def received_body(self, request: Received) -> Any:
        """Every request the contract's receiver took, parsed by the official SDK: the event's data."""
        event = parse(request)
        assert event.get_specversion() == "1.0" and event.get_type().startswith("dev.dlq-bridge.alert")
        return event.get_data()


class CloudEventsPeer:
    """A local event receiver; every request it took is parsed by the official SDK first."""

    scripted_failures = True

    def __init__(self, receiver: Receiver, base: str) -> None:
        self.receiver, self.base = receiver, base
        self.secrets = [WHSEC]

    def table(self, **extra: Any) -> dict[str, Any]:
        return {"name": "bus", "type": "webhook", "format": "cloudevents", "url": f"{self.base}/events",
                "secret": WHSEC, **extra}

    async def received(self) -> list[str]:
        taken = [r for r in self.receiver.requests if r.status < 300]
        return [json.dumps(parse(r).get_data()) for r in taken]

    def fail_next(self, failure: str) -> None:
        self.receiver.script.append(Reply(503) if failure == "retryable" else Reply(410, body="gone"))


class TestCloudEventsWebhookRuntimeContract(RuntimeContract):
    type_name = "webhook"

    @pytest.fixture
    async def peer(self) -> AsyncIterator[CloudEventsPeer]:
        receiver = Receiver()
        async with serve(receiver.app) as base:
            yield CloudEventsPeer(receiver, base)

    async def test_the_runtime_sends_cloudevents_whose_source_names_the_consumer(
        self, peer: CloudEventsPeer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
    ) -> None:
        await self.deliver(self.settings_for(make_settings, peer), aredis, "ce-1")
        [request] = peer.receiver.requests
        event = parse(request)
        assert event.get_source() == "dlq-bridge/test-1" and event.get_id() == "orders:ce-1"
        Webhook(WHSEC).verify(request.body, request.headers)
