"""PagerDuty Events v2: event shape, dedup keys, secrets, 202/400/429 at a real receiver."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis.asyncio as aioredis
from pydantic import SecretStr

from bridge.core.models import Notification, Severity
from bridge.settings import Settings
from bridge.sinks.pagerduty import PagerDutySink, dedup_key, render_event, render_group_event
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, dispatch, make_alert, open_delivery, sample

KEY = "R0UTINGKEY0123456789abcdef012345"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0}


def pd_sink(url: str, **extra: object) -> dict[str, object]:
    return {"name": "pd", "type": "pagerduty", "routing_key": KEY, "events_url": url,
            "events_per_minute": 6000, **extra}


def test_event_shape() -> None:
    event = render_event(make_alert(severity=Severity.CRITICAL, runbook_url="https://rb.example/t.md"), "bridge-1")
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == "job-1"
    payload = event["payload"]
    assert payload["severity"] == "critical"
    assert payload["source"] == "bridge-1"
    assert payload["component"] == "orders"
    assert payload["class"] == "ship_order"
    assert payload["summary"].startswith("ship_order failed on orders")
    details = payload["custom_details"]
    assert details["correlation_id"] == "corr-1" and details["attempts"] == 3
    assert details["likely_cause"] and details["next_steps"] and details["summary_source"] == "fallback"
    assert event["links"] == [{"href": "https://rb.example/t.md", "text": "Runbook"}]
    assert "routing_key" not in event


def test_class_falls_back_to_the_error_class_and_links_only_with_a_url() -> None:
    event = render_event(make_alert(job_name=None, last_error="KeyError: 'sku'"), "h")
    assert event["payload"]["class"] == "KeyError"
    assert "links" not in event


def test_long_ids_and_summaries_are_cut_to_pagerduty_limits() -> None:
    long_id = "x" * 300
    assert dedup_key("a" * 255) == "a" * 255
    assert dedup_key(long_id).startswith("sha256:") and len(dedup_key(long_id)) == 71
    assert dedup_key(long_id) == dedup_key(long_id) != dedup_key(long_id + "y")
    event = render_event(make_alert(job_id=long_id, queue="q" * 2000, last_error="e" * 1_000_000), "h")
    assert len(event["payload"]["summary"]) <= 1024
    assert len(json.dumps(event)) < 100_000


async def test_202_is_delivered_with_the_routing_key_and_stable_dedup_key(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    accepted = Reply(202, body='{"status":"success"}')
    receiver = Receiver(script=[Reply(503), Reply(429, {"Retry-After": "0"})], default=accepted)
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[pd_sink(f"{base}/v2/enqueue")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "delivered" and result.attempts == 3
    bodies = [json.loads(r.body) for r in receiver.requests]
    assert {b["routing_key"] for b in bodies} == {KEY}
    assert {b["dedup_key"] for b in bodies} == {"job-1"}
    assert bodies[0] == bodies[-1], "every retry sends the same event"
    assert sample(d.metrics, "dlq_bridge_delivery_attempts_total", sink="pd", outcome="retryable") == 2
    assert sample(d.metrics, "dlq_bridge_deliveries_total", sink="pd", outcome="delivered") == 1


async def test_400_is_permanent_and_the_record_holds_no_routing_key(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver(default=Reply(400, body=f'{{"status":"invalid event","key":"{KEY}"}}'))
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[pd_sink(f"{base}/v2/enqueue")])
        async with open_delivery(settings, aredis) as d:
            [result] = await dispatch(d.dispatcher, make_alert())
    assert result.outcome == "undeliverable" and result.attempts == 1
    assert len(receiver.requests) == 1
    [raw] = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    assert KEY.encode() not in raw
    record = json.loads(raw)
    assert record["sink"] == "pd" and record["sink_type"] == "pagerduty" and record["status"] == 400
    assert record["body"]["dedup_key"] == "job-1"


def test_the_rendered_event_holds_the_key_only_as_routing_key() -> None:
    sink = PagerDutySink("pd", SecretStr(KEY), "https://events.example/v2/enqueue", "h", http=None)  # type: ignore[arg-type]
    event = sink.render(make_alert())
    assert KEY not in json.dumps({k: v for k, v in event.items() if k != "routing_key"})


async def test_send_errors_never_show_the_key() -> None:
    """PagerDuty echoing the routing key in a 400 and a 500 (raw and JSON-escaped), and a refused
    connection: the errors carry the status, never the key."""
    from bridge.clients.http import build_http_client
    from bridge.core.errors import SinkError
    from bridge.settings import HttpSettings
    from tests.support.redis_server import free_port

    echo = Receiver(script=[Reply(400, body=json.dumps({"status": "invalid", "errors": [f"bad key {KEY}"]})),
                            Reply(500, body=f"routing_key={KEY}")])
    errors: list[SinkError] = []
    async with serve(echo.app) as base, build_http_client(HttpSettings()) as http:
        for url in (f"{base}/v2/enqueue", f"{base}/v2/enqueue", f"http://127.0.0.1:{free_port()}/v2/enqueue"):
            try:
                await PagerDutySink("pd", SecretStr(KEY), url, "h", http).send(make_alert())
            except SinkError as exc:
                errors.append(exc)
    assert [e.status for e in errors] == [400, 500, None], errors
    assert len(echo.requests) == 2 and KEY in echo.requests[0].body.decode(), "the key did go to PagerDuty"
    assert not [str(e) for e in errors if KEY in f"{e} {e.detail}"]


def test_a_cause_groups_component_and_class_are_its_cause_whichever_job_came_first() -> None:
    """Any queue's job can open a cause group (a producer can copy another queue's error): the incident's
    component and class come from the cause, so PagerDuty routing on them never follows the first job."""
    error = "ConnectionRefusedError: payments-db:5432 refused connection (request 7)"
    first = make_alert(queue="reports", job_id="r-1", job_name="export_csv", last_error=error)
    group = Notification(
        sink="pd", group_key="cause:error:abc", kind="digest", sequence=1, count=2, new_count=2, previous_at=None,
        first_seen=1_764_499_990.0, last_seen=1_764_500_000.0, queues=["reports", "payments"],
        queue_counts={"reports": 1, "payments": 1}, sample_job_ids=[], severity=first.severity, first=first,
        opened_at=1_764_499_990.0,
    )
    payload = render_group_event(group, "bridge-1")["payload"]
    assert (payload["component"], payload["class"]) == ("payments-db:5432", "ConnectionRefusedError")
    by_fingerprint = render_group_event(group.model_copy(update={"group_key": "fp:abc"}), "bridge-1")["payload"]
    assert (by_fingerprint["component"], by_fingerprint["class"]) == ("reports", "export_csv")
