"""The bridge's own spans as an OTLP/HTTP receiver decodes them (docs/tracing.md, "The bridge's own spans").

The real bridge (`dlq-bridge run`, a subprocess) drains a real Redis, asks a local fake OpenClaw gateway
(which returns `usage`), delivers to a local webhook receiver and exports its spans to a local OTLP/HTTP
receiver that decodes them with the official `opentelemetry-proto` messages.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import envelope_entry
from tests.support.bridge_process import kill9, start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.ports import free_port
from tests.support.receiver import Receiver, Reply

SOURCE = "dead_letter:orders"
JOB_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
JOB_SPAN = "00f067aa0ba902b7"
JOB_TRACEPARENT = f"00-{JOB_TRACE}-{JOB_SPAN}-03"  # the flags the OpenTelemetry SDK sets
USAGE = {"prompt_tokens": 412, "completion_tokens": 57, "total_tokens": 469}
MODEL = "openclaw/dlq-summarizer"
START_S = 120.0  # a start on a loaded 2-core machine can take a minute
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}  # the SDK's batch delay, read from the environment


def config(
    tmp_path: Path,
    redis_url: str,
    *,
    port: int,
    consumer: str,
    endpoint: str | None,
    gateway: str | None,
    hook: str,
    name: str = "b",
    **extra: dict[str, Any],
) -> Path:
    sections: dict[str, Any] = {
        "server": {"port": port, "grace_s": 1},
        "redis": {"url": redis_url, "consumer_id": consumer},
        "sources": {"poll_interval_s": 0.01, "rescan_interval_s": 0.2},
        "delivery": {
            "base_delay_s": 0.05,
            "max_delay_s": 0.2,
            "max_attempts": 100,
            "lease_s": 2.0,
            "reservation_ttl_s": 2.0,
        },
        "sinks": [{"name": "hook", "type": "webhook", "url": f"{hook}/hooks/dlq", "secret": "hook-secret-0123456789"}],
    }
    if gateway is not None:
        sections["openclaw"] = {"url": gateway, "token_env": ""}
    if endpoint is not None:
        sections["tracing"] = {"otlp_endpoint": endpoint, "service_name": f"dlq-bridge-{name}"}
    for section, values in extra.items():
        sections[section] = {**sections.get(section, {}), **values}
    return write_config(tmp_path / f"{name}.toml", sections)


class Bridge:
    """One `dlq-bridge run`, stopped (SIGTERM, then kill) at the end; its stderr kept."""

    def __init__(self, cfg: Path, port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.proc = start_bridge(["--config", str(cfg), "run"], env={**FAST_EXPORT, **(env or {})})
        wait_healthz(port, self.proc, timeout_s=START_S)

    def stop(self, timeout_s: float = 20.0) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill9(self.proc)
            raise
        err = self.proc.stderr.read().decode() if self.proc.stderr else ""
        return code, err

    def kill(self) -> None:
        kill9(self.proc)


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def gateway() -> Iterator[str]:
    with ThreadedServer(FakeGateway(usage=USAGE).app()) as server:
        yield server.url


def one(spans: list[ReceivedSpan]) -> ReceivedSpan:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def test_one_dead_letter_is_one_trace_linked_to_its_job(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis, otlp: OtlpReceiver, gateway: str
) -> None:
    hook = Receiver(script=[Reply(status=503)])  # the first attempt fails: the delivery has two attempts
    with ThreadedServer(hook.app) as receiver:
        port = free_port()
        cfg = config(
            tmp_path, redis_url, port=port, consumer="t-1", endpoint=otlp.endpoint, gateway=gateway, hook=receiver.url
        )
        bridge = Bridge(cfg, port)
        try:
            clean_redis.lpush(SOURCE, envelope_entry(job_id="traced-1", traceparent=JOB_TRACEPARENT))
            assert wait_for(lambda: otlp.starting("deliver "), 20), "no delivery span exported"
            assert len(hook.requests) == 2
        finally:
            code, err = bridge.stop()
    assert code == 0

    root = one(otlp.starting("process "))
    assert root.name == f"process {SOURCE}"
    assert root.parent_span_id == "" and root.kind == "consumer"
    assert root.attributes["messaging.system"] == "redis"
    assert root.attributes["messaging.operation.type"] == "process"
    assert root.attributes["messaging.destination.name"] == SOURCE
    assert root.attributes["messaging.message.id"] == "traced-1"
    assert root.resource["service.name"] == "dlq-bridge-b"
    job_links = [link for link in root.links if link.attributes.get("dlq_bridge.link") == "job"]
    assert [(link.trace_id, link.span_id) for link in job_links] == [(JOB_TRACE, JOB_SPAN)]
    assert root.trace_id != JOB_TRACE  # a trace of its own, linked (not parented) to the job's

    stages = {s.name: s for s in otlp.children(root)}
    assert {"claim", "intake", "summarize", "hand-off"} <= set(stages)
    assert stages["claim"].attributes["messaging.operation.type"] == "receive"
    assert stages["claim"].start_ns == root.start_ns  # from the claim on
    assert stages["hand-off"].attributes["dlq_bridge.sinks"] == ["hook"]
    assert stages["summarize"].attributes["dlq_bridge.summary.source"] == "openclaw"

    chat = one(otlp.children(stages["summarize"]))
    assert chat.name == f"chat {MODEL}" and chat.kind == "client"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openclaw"
    assert chat.attributes["gen_ai.request.model"] == MODEL
    assert chat.attributes["gen_ai.usage.input_tokens"] == 412
    assert chat.attributes["gen_ai.usage.output_tokens"] == 57
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert "error.type" not in chat.attributes

    deliver = one(otlp.named("deliver hook"))
    assert (deliver.trace_id, deliver.parent_span_id) == (root.trace_id, root.span_id)
    assert deliver.kind == "producer" and deliver.attributes["messaging.destination.name"] == "hook"
    assert deliver.attributes["dlq_bridge.delivery.outcome"] == "delivered"
    assert deliver.attributes["dlq_bridge.delivery.attempts"] == 2
    attempts = sorted(otlp.children(deliver), key=lambda s: s.start_ns)
    assert [a.name for a in attempts] == ["attempt", "attempt"]
    assert attempts[0].status_code == 2 and attempts[0].attributes["http.response.status_code"] == 503
    assert attempts[1].status_code != 2
    # the retry's log line carries the ids of the span it was written in
    retry_line = next(line for line in err.splitlines() if "attempt 1 failed" in line)
    assert f"trace_id={root.trace_id} span_id={deliver.span_id}" in retry_line


def test_a_delivery_on_another_replica_continues_the_trace(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis, otlp: OtlpReceiver
) -> None:
    hook = Receiver(default=Reply(status=503))  # down while replica A runs
    with ThreadedServer(hook.app) as receiver:
        port_a, port_b = free_port(), free_port()
        cfg_a = config(
            tmp_path,
            redis_url,
            port=port_a,
            consumer="t-a",
            endpoint=otlp.endpoint,
            gateway=None,
            hook=receiver.url,
            name="a",
        )
        cfg_b = config(
            tmp_path,
            redis_url,
            port=port_b,
            consumer="t-b",
            endpoint=otlp.endpoint,
            gateway=None,
            hook=receiver.url,
            name="b",
        )
        a = Bridge(cfg_a, port_a)
        try:
            clean_redis.lpush(SOURCE, envelope_entry(job_id="moved-1"))
            assert wait_for(lambda: len(hook.requests) >= 2, 20), "replica A never tried the sink"
        finally:
            assert a.stop()[0] == 0  # its in-flight delivery is given up after grace_s; the lease goes back
        tried_by_a = len(hook.requests)
        hook.default = Reply(status=200)
        b = Bridge(cfg_b, port_b)
        try:
            assert wait_for(lambda: any(r.status == 200 for r in hook.requests), 20), "replica B never delivered"
            assert wait_for(
                lambda: any(s.resource["service.name"] == "dlq-bridge-b" for s in otlp.named("deliver hook")), 10
            )
        finally:
            assert b.stop()[0] == 0
    assert tried_by_a >= 2
    root = one(otlp.starting("process "))
    assert root.resource["service.name"] == "dlq-bridge-a"
    by_b = [s for s in otlp.named("deliver hook") if s.resource["service.name"] == "dlq-bridge-b"]
    delivered = one([s for s in by_b if s.attributes.get("dlq_bridge.delivery.outcome") == "delivered"])
    assert (delivered.trace_id, delivered.parent_span_id) == (root.trace_id, root.span_id)
    queued = json.loads(json.dumps([s.trace_id for s in otlp.spans]))
    assert set(queued) == {root.trace_id}  # every span of both replicas is in the one trace


def test_a_storm_shares_one_model_call_and_links_every_job_it_served(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis, otlp: OtlpReceiver, gateway: str
) -> None:
    hook = Receiver()
    with ThreadedServer(hook.app) as receiver:
        port = free_port()
        cfg = config(
            tmp_path, redis_url, port=port, consumer="t-s", endpoint=otlp.endpoint, gateway=gateway, hook=receiver.url
        )
        bridge = Bridge(cfg, port)
        try:
            clean_redis.lpush(SOURCE, *[envelope_entry(job_id=f"storm-{i}") for i in range(6)])
            assert wait_for(lambda: len(otlp.named("deliver hook")) >= 6, 20)
        finally:
            assert bridge.stop()[0] == 0
    chat = one(otlp.starting("chat "))  # one call for one failure fingerprint
    summaries = otlp.named("summarize")
    assert len(summaries) == 6
    served = [s for s in summaries if s.attributes["dlq_bridge.summary.source"] == "cache"]
    assert len(served) == 5
    for span in served:  # each job served by the shared summary links the call that made it
        assert [(link.trace_id, link.span_id) for link in span.links] == [(chat.trace_id, chat.span_id)]
    served_back = {(link.trace_id, link.span_id) for link in chat.links}
    assert served_back <= {(s.trace_id, s.span_id) for s in served}  # jobs that joined while it ran
