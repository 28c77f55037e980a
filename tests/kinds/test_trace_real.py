"""A failed job's trace, from its real instrumentation to the cards on-call clicks (issue 37).

Celery traced by `opentelemetry-instrumentation-celery`, BullMQ by `bullmq-otel`, Sidekiq with
`traceparent` in the job hash as its instrumentation writes it: `dlq-bridge run` reads each job's
trace id, and the webhook body and the Slack card a real local receiver gets carry it with the
link built from `[tracing] trace_url`. Hostile `traceparent` values, in the AMQP headers and the
Sidekiq job hash, reach no sink.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.kinds import producers, traced_producers
from tests.kinds.test_service import config_text
from tests.support.bridge_process import start_bridge, terminate, wait_healthz
from tests.support.http_server import serve
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow

WAIT_S = 90.0
TRACE_URL = "https://tempo.example/explore?traceId={trace_id}"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
HOSTILE = [
    f"00-{TRACE}-{SPAN}-01" + "0" * 300,  # too long
    f"ff-{TRACE}-{SPAN}-01",  # wrong version
    f"00-{TRACE[:-4]}zzzz-{SPAN}-01",  # non-hex
    f"00-{TRACE}-{SPAN}-01\r\nX-Injected: yes",  # CR/LF
    "https://evil.example/steal?t=00-" + TRACE,  # a URL
]


class Bridge:
    """`dlq-bridge run` with one kind, a webhook and a Slack-compatible receiver, and `[tracing]`."""

    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.tmp, self.redis_url = tmp, redis_url
        self.hook, self.slack = Receiver(), Receiver()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.hook_url = self.slack_url = ""

    def start(self, kind: str, table: dict[str, Any]) -> None:
        port = free_port()
        text = config_text(self.redis_url, "trace-1", port, self.hook_url, kind, table)
        text += (
            f'[[sinks]]\nname = "chat"\ntype = "slack"\nurl = {json.dumps(self.slack_url)}\ngroup_by = "none"\n'
            f"[tracing]\ntrace_url = {json.dumps(TRACE_URL)}\n"
        )
        path = self.tmp / "bridge.toml"
        path.write_text(text)
        proc = start_bridge(["--config", str(path), "run"])
        self.procs.append(proc)
        wait_healthz(port, proc)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.hook.requests if 200 <= r.status < 300]

    def cards(self) -> list[str]:
        """Each Slack card's blocks as JSON text."""
        return [json.dumps(json.loads(r.body)["blocks"]) for r in self.slack.requests if 200 <= r.status < 300]

    async def wait_for(self, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out: {len(self.bodies())} webhook bodies, {len(self.cards())} cards")
            await asyncio.sleep(0.1)


@pytest.fixture
async def bridge(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Bridge]:
    monkeypatch.setenv("RABBITMQ_URL", producers.AMQP_URL)
    b = Bridge(tmp_path, redis_url)
    async with serve(b.hook.app) as hook_base, serve(b.slack.app) as slack_base:
        b.hook_url, b.slack_url = f"{hook_base}/hooks", f"{slack_base}/slack"
        try:
            yield b
        finally:
            for proc in b.procs:
                terminate(proc, timeout_s=15)


async def assert_traced(b: Bridge, traces: dict[str, str], job_id_of: Callable[[dict[str, Any]], str]) -> None:
    """Every produced job's alert, at the webhook and on the Slack card, carries its own trace and link."""
    await b.wait_for(lambda: len(b.bodies()) >= len(traces) and len(b.cards()) >= len(traces))
    by_job = {job_id_of(body): body for body in b.bodies()}
    assert set(by_job) == set(traces)
    for job_id, trace_id in traces.items():
        body = by_job[job_id]
        assert body["trace_id"] == trace_id
        assert body["traceparent"].startswith(f"00-{trace_id}-")
        assert body["trace_url"] == TRACE_URL.replace("{trace_id}", trace_id)
    cards = " ".join(b.cards())
    for trace_id in traces.values():
        assert f"<{TRACE_URL.replace('{trace_id}', trace_id)}|View trace>" in cards
    fields = ("job_id", "trace_id", "trace_url", "traceparent")
    print(f"\nwebhook: {json.dumps({f: body[f] for f in fields})}\nSlack card: {b.cards()[0]}")  # shown with -s


async def test_celery_traced_by_its_real_instrumentation_links_each_alert_to_its_trace(bridge: Bridge) -> None:
    reason = traced_producers.celery_otel_missing()
    if reason:
        pytest.skip(reason)
    names = producers.CeleryNames.fresh()
    producers.declare_celery(names)
    try:
        traces = traced_producers.produce_celery(names, 2)
        bridge.start("rabbitmq", {"queue": names.dlq})
        await assert_traced(bridge, traces, lambda body: body["job_id"])
    finally:
        producers.delete_celery(names)


async def test_bullmq_traced_by_bullmq_otel_links_each_alert_to_its_trace(bridge: Bridge) -> None:
    reason = traced_producers.bullmq_otel_missing()
    if reason:
        pytest.skip(reason)
    traces = traced_producers.produce_bullmq(bridge.redis_url, "invoices", 2)
    bridge.start("bullmq", {"prefix": "bull", "queues": ["invoices"]})
    await assert_traced(bridge, traces, lambda body: body["job_id"])


async def test_sidekiq_job_hash_traceparent_links_each_alert_to_its_trace(bridge: Bridge) -> None:
    reason = producers.sidekiq_missing()
    if reason:
        pytest.skip(reason)
    traces = traced_producers.produce_sidekiq(bridge.redis_url, 2)
    bridge.start("sidekiq", {})
    await assert_traced(bridge, traces, lambda body: body["job_id"])


def _assert_nothing_hostile_reached(b: Bridge) -> None:
    received = [r.body.decode() for r in [*b.hook.requests, *b.slack.requests]]
    for text in received:
        for hostile in HOSTILE:
            for piece in (hostile, json.dumps(hostile)[1:-1], "evil.example", "X-Injected", "zzzz"):
                assert piece not in text
    for body in b.bodies():
        assert body["traceparent"] is None and body["trace_id"] is None and body["trace_url"] is None
    assert not any("View trace" in card for card in b.cards())


async def test_hostile_traceparent_in_sidekiq_job_hashes_reaches_no_sink(
    bridge: Bridge, clean_redis: redis.Redis
) -> None:
    now = time.time()
    for i, hostile in enumerate(HOSTILE):
        job = {
            "jid": f"h{i}",
            "class": "ChargeCardWorker",
            "queue": "billing",
            "args": [i],
            "traceparent": hostile,
            "tracestate": hostile,
            "error_class": "CardDeclined",
            "error_message": "declined",
            "failed_at": now,
            "retry_count": 0,
        }
        clean_redis.zadd("dead", {json.dumps(job): now})
    bridge.start("sidekiq", {})
    await bridge.wait_for(lambda: len(bridge.bodies()) >= len(HOSTILE) and len(bridge.cards()) >= len(HOSTILE))
    _assert_nothing_hostile_reached(bridge)


async def test_hostile_traceparent_in_amqp_headers_reaches_no_sink(bridge: Bridge) -> None:
    reason = producers.rabbitmq_missing()
    if reason:
        pytest.skip(reason)
    from kombu import Connection

    names = producers.CeleryNames.fresh()
    producers.declare_celery(names)
    try:
        with Connection(producers.AMQP_URL) as conn:
            producer = conn.Producer()
            for i, hostile in enumerate(HOSTILE):
                headers = {"id": f"h{i}", "task": "shop.reserve_stock", "traceparent": hostile}
                producer.publish([[i], {}, {}], routing_key=names.dlq, headers=headers, serializer="json")
        bridge.start("rabbitmq", {"queue": names.dlq})
        await bridge.wait_for(lambda: len(bridge.bodies()) >= len(HOSTILE) and len(bridge.cards()) >= len(HOSTILE))
        _assert_nothing_hostile_reached(bridge)
    finally:
        producers.delete_celery(names)
