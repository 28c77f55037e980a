"""A collector that is down or hangs never delays alerting; with tracing off nothing of the SDK is even imported.

The real bridge (`dlq-bridge run`, a subprocess) on a real Redis, delivering to a local webhook receiver.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import envelope_entry
from tests.support.bridge_process import kill9, wait_for, wait_healthz
from tests.support.http_server import ThreadedServer
from tests.support.otlp_receiver import OtlpReceiver, SilentCollector
from tests.support.ports import free_port
from tests.support.receiver import Receiver
from tests.test_telemetry_spans import SOURCE, START_S, Bridge, config

EXPORT_TIMEOUT_S = 15.0  # one export may hang this long; alerting must not notice
ALERT_BOUND_S = 8.0  # every alert reaches its sink this soon after its push, collector or not
STOP_BOUND_S = EXPORT_TIMEOUT_S + 5.0  # the flush at stop waits the export timeout at most, then the grace


@pytest.fixture(params=["down", "hangs"])
def collector(request: pytest.FixtureRequest) -> Iterator[tuple[str, SilentCollector | None]]:
    if request.param == "down":
        yield f"http://127.0.0.1:{free_port()}/v1/traces", None  # nothing listens there
        return
    with SilentCollector() as silent:
        yield silent.endpoint, silent


def push_and_time(client: redis.Redis, hook: Receiver, first: int, count: int) -> float:
    """Seconds from pushing `count` entries until the sink has them all."""
    started = time.monotonic()
    client.lpush(SOURCE, *[envelope_entry(job_id=f"c{first + i}") for i in range(count)])
    assert wait_for(lambda: len(hook.requests) >= first + count, 30), f"{len(hook.requests)} delivered"
    return time.monotonic() - started


def test_a_collector_down_or_hanging_never_delays_alerting(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis, collector: tuple[str, SilentCollector | None]
) -> None:
    endpoint, silent = collector
    hook = Receiver()
    with ThreadedServer(hook.app) as receiver:
        port = free_port()
        cfg = config(
            tmp_path,
            redis_url,
            port=port,
            consumer="t-c",
            endpoint=endpoint,
            gateway=None,
            hook=receiver.url,
            tracing={"export_timeout_s": EXPORT_TIMEOUT_S},
        )
        bridge = Bridge(cfg, port)
        try:
            first = push_and_time(clean_redis, hook, 0, 10)
            if silent is not None:  # the exporter is now stuck in an export that will not be answered
                assert wait_for(lambda: silent.connections >= 1, 10), "the exporter never reached the collector"
            second = push_and_time(clean_redis, hook, 10, 10)
            stopping = time.monotonic()
            code, _ = bridge.stop(timeout_s=STOP_BOUND_S + 10)
            stopped_in = time.monotonic() - stopping
        finally:
            bridge.kill()
    assert code == 0
    assert first < ALERT_BOUND_S and second < ALERT_BOUND_S, (first, second)
    assert stopped_in < STOP_BOUND_S, stopped_in


MODULES_AT_EXIT = """
import atexit, runpy, sys
path = sys.argv[1]
TRACING_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter",
                   "bridge.telemetry.otel", "bridge.telemetry.logs")
def _write():
    with open(path, "w") as out:
        out.write("\\n".join(sorted(m for m in sys.modules if m.startswith(TRACING_MODULES))))
atexit.register(_write)
sys.argv = ["dlq-bridge", "--config", sys.argv[2], "run"]
runpy.run_module("bridge", run_name="__main__")
"""


def run_counting_modules(
    cfg: Path, port: int, modules: Path, env: dict[str, str], client: redis.Redis, hook: Receiver, job_id: str
) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", MODULES_AT_EXIT, str(modules), str(cfg)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_healthz(port, proc, timeout_s=START_S)
        client.lpush(SOURCE, envelope_entry(job_id=job_id))
        assert wait_for(lambda: any(job_id.encode() in r.body for r in hook.requests), 20)
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    finally:
        kill9(proc)
    return modules.read_text().split()


def test_with_tracing_off_no_span_is_made_and_the_sdk_is_never_imported(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis
) -> None:
    import os

    hook = Receiver()
    with OtlpReceiver() as otlp, ThreadedServer(hook.app) as receiver:
        # the SDK's own variables point at a receiver: the bridge reads only [tracing]
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint.removesuffix("/v1/traces"),
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        port = free_port()
        off = config(
            tmp_path, redis_url, port=port, consumer="t-off", endpoint=None, gateway=None, hook=receiver.url, name="off"
        )
        imported_off = run_counting_modules(off, port, tmp_path / "off.txt", env, clean_redis, hook, "off-1")
        on = config(
            tmp_path,
            redis_url,
            port=port,
            consumer="t-on",
            endpoint=otlp.endpoint,
            gateway=None,
            hook=receiver.url,
            name="on",
        )
        spans_before_on = len(otlp.spans)
        imported_on = run_counting_modules(on, port, tmp_path / "on.txt", env, clean_redis, hook, "on-1")
        assert wait_for(lambda: otlp.starting("process "), 10)
    # (redis-py 8 and FastAPI import parts of OpenTelemetry's API and metrics SDK whenever it is installed:
    # not the tracing SDK, not the exporter, not the bridge's own span code)
    assert imported_off == []
    assert spans_before_on == 0 and otlp.requests >= 1  # the receiver works: tracing on was heard
    assert {"opentelemetry.sdk.trace", "bridge.telemetry.otel", "bridge.telemetry.logs"} <= set(imported_on)
