"""Issue 10, defects 5, 7 and 8: SIGTERM with Redis down, logs that name things, the reap metric."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.bridge_process import kill9, start_bridge, write_config
from tests.support.redis_server import free_port


def _wait(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _healthz(port: int) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=3).status_code
    except httpx.HTTPError:
        return 0


@pytest.mark.failure
def test_sigterm_while_redis_is_down_exits_once_nothing_is_in_flight(tmp_path: Path) -> None:
    """Defect 5 (and 7: the log names the masked Redis target; 4: typos warned at start)."""
    http_port = free_port()
    with socket.socket() as down:  # bound, never listening: Redis refuses from the start
        down.bind(("127.0.0.1", 0))
        redis_port = down.getsockname()[1]
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": http_port, "grace_s": 120},
            "redis": {"url": f"redis://:s3cret@127.0.0.1:{redis_port}/0", "consumer_id": "down-1",
                      "socket_timeout_s": 1.0},
        })
        proc = start_bridge(["--config", str(cfg), "run"], env={"DLQ_BRIDGE_SERVR__PORT": "1"})
        try:
            assert _wait(lambda: _healthz(http_port) == 503, 30), "the service should answer 503"
            time.sleep(1.0)  # the pipeline is retrying its start against the dead Redis
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)  # the grace period is 120 s
            except subprocess.TimeoutExpired:
                pytest.fail("SIGTERM with nothing in flight waited for the grace period")
            err = proc.stderr.read().decode() if proc.stderr else ""
        finally:
            kill9(proc)
    assert code == 0, err[-2000:]
    assert f"Redis unavailable at redis://:****@127.0.0.1:{redis_port}/0 (ConnectionError)" in err
    assert "s3cret" not in err
    assert "nothing in flight and Redis unavailable: stopping now" in err
    assert "Traceback" not in err
    assert "DLQ_BRIDGE_SERVR__PORT matches no setting" in err
    assert "did you mean DLQ_BRIDGE_SERVER__PORT?" in err


async def test_openclaw_failure_log_names_the_cause_class(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 7: not just "(error)", but which error."""
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="j1"))
    with socket.socket() as closed:  # bound, not listening: refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        settings = make_settings(openclaw={"url": url, "token": "t", "timeout_s": 5.0})
        with caplog.at_level(logging.WARNING, logger="bridge.summarize.openclaw_summarizer"):
            async with open_runtime(settings, stdout=io.StringIO()) as runtime:
                await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)
    failures = [r.getMessage() for r in caplog.records if "OpenClaw summary failed" in r.getMessage()]
    assert failures and failures[0].startswith(
        "OpenClaw summary failed (error: gateway unreachable: connection refused (ConnectionRefusedError)")


async def test_the_periodic_reap_is_counted_in_the_reaped_metric(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """Defect 8: the entries a replica reaps from a dead consumer reach dlq_bridge_reaped_entries_total."""
    source = "dead_letter:orders"
    await aredis.lpush(source, envelope_entry(job_id="seed"))  # makes the DLQ known to the rescan
    dead = keys.processing(source, "dead-consumer")
    await aredis.lpush(dead, *[json.dumps({"job_id": f"r{i}"}) for i in range(5)])
    settings = make_settings(sources={"reap_interval_s": 0.2})
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        stop = asyncio.Event()
        task = asyncio.create_task(runtime.pipeline.run(stop))
        deadline = time.monotonic() + 30
        while await aredis.llen(keys.alerted(source)) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 30)
    assert await aredis.llen(keys.alerted(source)) == 6
    assert await aredis.exists(dead) == 0
    assert runtime.metrics.registry.get_sample_value("dlq_bridge_reaped_entries_total") == 5
