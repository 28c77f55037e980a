"""Poison pills: an entry that keeps killing (or outlasting) its consumer is quarantined and alerted.

The loop keeps ticking whatever one entry does: intake runs on threads with a deadline.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn

from bridge.app import create_app
from bridge.core.models import DeadLetter
from bridge.drain import pipeline as pipeline_module
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.bridge_process import kill9, start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

POISON = json.dumps({"job_id": "poison-1", "job_name": "explode", "last_error": "boom"}).encode()
SOURCE = "dead_letter:poison"


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def test_an_entry_whose_consumer_dies_three_times_is_quarantined_and_alerted(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    gateway = FakeGateway(latency_s=120)  # every consumer dies while holding the entry
    receiver = Receiver()
    clean_redis.lpush(SOURCE, POISON)
    port = free_port()
    processing = keys.processing(SOURCE, "poison-1")
    with ThreadedServer(gateway.app()) as gw, ThreadedServer(receiver.app) as hook:
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port, "grace_s": 2},
            "redis": {"url": redis_url, "consumer_id": "poison-1"},
            "severity": {"default": "warning", "poison*": "critical"},
            "openclaw": {"url": gw.url, "token": "t", "timeout_s": 300, "calls_per_minute": 0},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{hook.url}/hook", "secret": "s"}],
        })
        for death in range(1, 4):
            proc = start_bridge(["--config", str(cfg), "run"])
            assert wait_for(lambda n=death: gateway.calls == n and clean_redis.llen(processing) == 1, 30), death
            kill9(proc)
        # Two returns counted so far; the third death is counted when the next start returns it.
        assert int(clean_redis.get(keys.claims(SOURCE, digest(POISON))) or 0) == 2
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            wait_healthz(port, proc)
            assert wait_for(lambda: clean_redis.llen(keys.quarantine(SOURCE)) == 1, 20)
            assert wait_for(lambda: len(receiver.requests) == 1, 20)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert clean_redis.lrange(keys.quarantine(SOURCE), 0, -1) == [POISON], "kept byte for byte"
    assert clean_redis.llen(SOURCE) == 0 and clean_redis.llen(processing) == 0
    assert clean_redis.llen(keys.alerted(SOURCE)) == 0
    assert not clean_redis.exists(keys.claims(SOURCE, digest(POISON)))
    assert gateway.calls == 3, "a quarantined entry is never parsed or summarized again"
    body = json.loads(receiver.requests[0].body)
    assert body["summary"]["title"] == "Quarantined dead letter: processing failed 3 times"
    assert body["job_id"] == "quarantined:poison-1" and body["queue"] == "poison"  # read from its head
    assert (body["job_name"], body["last_error"]) == ("explode", "boom")
    assert body["severity"] == "critical"


@pytest.fixture
def running_service(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    """The real app (lifespan on: the pipeline runs) served by uvicorn on a thread of this process."""
    receiver = Receiver()
    with ThreadedServer(receiver.app) as hook:
        port = free_port()
        settings = Settings(
            server={"port": port, "grace_s": 2},
            redis={"url": redis_url, "consumer_id": "deadline-1"},
            sources={"entry_deadline_s": 1.0, "heartbeat_interval_s": 0.3, "heartbeat_ttl_s": 3,
                     "rescan_interval_s": 0.2, "poll_interval_s": 0.01},
            severity={"default": "error"},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{hook.url}/hook", "secret": "s"}],
        )
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        assert wait_for(lambda: server.started, 20)
        try:
            yield {"port": port, "receiver": receiver, "redis": clean_redis}
        finally:
            server.should_exit = True
            thread.join(timeout=30)


def test_healthz_and_heartbeat_keep_ticking_while_one_entry_runs_away(
    running_service: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_intake = pipeline_module.intake
    release = threading.Event()

    def hostile_intake(raw: bytes, source_key: str, excerpt_max: int) -> DeadLetter:
        if b"runaway" in raw:  # a CPU-bound runaway on its thread, holding the GIL in turns
            end = time.monotonic() + 4.0
            while time.monotonic() < end and not release.is_set():
                pass
        return real_intake(raw, source_key, excerpt_max)

    monkeypatch.setattr(pipeline_module, "intake", hostile_intake)
    port, receiver, client = running_service["port"], running_service["receiver"], running_service["redis"]
    runaway = json.dumps({"job_id": "runaway-1", "last_error": "runaway"}).encode()
    client.lpush("dead_letter:hostile", runaway)
    client.lpush("dead_letter:calm", json.dumps({"job_id": "calm-1", "last_error": "fine"}))
    beats, answers = [], []
    try:
        started = time.monotonic()
        while time.monotonic() - started < 4.0:
            t0 = time.monotonic()
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10.0)  # a hang guard, not a bound
            answers.append((response.status_code, time.monotonic() - t0, response.json()))
            beats.append(json.loads(client.get(keys.heartbeat("deadline-1")) or b"{}").get("at"))
            time.sleep(0.2)
    finally:
        release.set()
    assert all(status == 200 for status, _, _ in answers), answers
    # counts, not speed: several answers and heartbeats came while it ran away (a blocked loop gives
    # one late answer and no fresh heartbeat until the runaway ends)
    assert len({b for b in beats if b}) >= 5, "the heartbeat kept being refreshed"
    degraded = sum(body["checks"].get("intake", {}).get("status") == "degraded" for _, _, body in answers)
    assert degraded >= 2, f"/healthz answered {degraded} times with intake degraded while it ran away"
    assert wait_for(lambda: len(receiver.requests) == 2, 10)
    bodies = {json.loads(r.body)["job_id"]: json.loads(r.body) for r in receiver.requests}
    assert bodies["calm-1"]["summary"]["title"] != bodies["quarantined:runaway-1"]["summary"]["title"]
    quarantined = bodies["quarantined:runaway-1"]
    assert quarantined["summary"]["title"] == "Quarantined dead letter: processing took over 1 s"
    assert quarantined["queue"] == "hostile" and quarantined["severity"] == "error"
    assert client.lrange(keys.quarantine("dead_letter:hostile"), 0, -1) == [runaway]
    assert client.llen(keys.alerted("dead_letter:calm")) == 1


async def test_a_runaway_call_is_abandoned_and_replaced_and_errors_come_back() -> None:
    from bridge.core.offloop import DeadlineExceeded, OffLoop

    offloop = OffLoop(1)
    release = threading.Event()
    try:
        with pytest.raises(DeadlineExceeded):
            await offloop.run(lambda: release.wait(10), deadline_s=0.2)
        assert offloop.runaways == 1
        assert await offloop.run(lambda: 42, deadline_s=5) == 42, "a fresh thread serves the next call"
        with pytest.raises(ZeroDivisionError):
            await offloop.run(lambda: 1 // 0, deadline_s=5)
        release.set()
        deadline = time.monotonic() + 5
        while offloop.runaways and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert offloop.runaways == 0
    finally:
        release.set()
        offloop.close()


def test_identical_entries_claimed_side_by_side_are_alerted_not_quarantined(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Only a consumer's death counts against an entry: five identical entries are five alerts."""
    receiver = Receiver()
    entry = json.dumps({"job_id": "same", "last_error": "ValueError: twin"}).encode()
    clean_redis.lpush(SOURCE, *[entry] * 5)
    port = free_port()
    with ThreadedServer(receiver.app) as hook:
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "twins-1"},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{hook.url}/hook", "secret": "s"}],
        })
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            wait_healthz(port, proc)
            assert wait_for(lambda: clean_redis.llen(keys.alerted(SOURCE)) == 5, 30)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert clean_redis.llen(keys.quarantine(SOURCE)) == 0
    assert not clean_redis.exists(keys.claims(SOURCE, digest(entry)))
