"""Redis stopped and restarted mid-drain: the bridge reconnects by itself and loses nothing."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx
import pytest
import redis

from bridge.stores import keys
from tests.support.bridge_process import kill9, start_bridge, wait_healthz, write_config
from tests.support.redis_server import free_port, start_private_redis

pytestmark = pytest.mark.failure

ENTRIES = 1500
SOURCE = "dead_letter:restart"


def status(port: int) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=3).status_code
    except httpx.HTTPError:
        return 0


def wait_until(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except redis.RedisError:
            pass
        time.sleep(0.02)
    return False


def test_redis_restart_mid_drain_loses_nothing(tmp_path: Path) -> None:
    server = start_private_redis(appendonly=True)
    client = redis.Redis.from_url(server.url)
    entries = [json.dumps({"job_id": f"r{i}", "last_error": f"E{i}"}).encode() for i in range(ENTRIES)]
    client.lpush(SOURCE, *entries)
    port = free_port()
    cfg = write_config(tmp_path / "b.toml", {
        "server": {"port": port, "grace_s": 5},
        "redis": {"url": server.url, "consumer_id": "restart-1", "socket_timeout_s": 1.0},
        "sources": {"concurrency": 16, "reap_interval_s": 1.0},
    })
    proc = start_bridge(["--config", str(cfg), "run"])
    try:
        wait_healthz(port, proc)
        assert wait_until(lambda: client.llen(keys.alerted(SOURCE)) >= 200, 30)
        assert client.llen(SOURCE) > 0, "the drain should still be going when Redis stops"
        server.stop()  # graceful: Redis writes its AOF, as a restart does
        assert wait_until(lambda: status(port) == 503, 10), "healthz must go 503 while Redis is down"
        time.sleep(1.0)
        server.start()
        client = redis.Redis.from_url(server.url)
        assert wait_until(lambda: status(port) == 200, 20), "healthz must recover without a restart"
        drained = wait_until(
            lambda: client.llen(keys.alerted(SOURCE)) >= ENTRIES and client.llen(SOURCE) == 0, 60
        )
        archived = client.lrange(keys.alerted(SOURCE), 0, -1)
        assert drained, f"archived {len(archived)} of {ENTRIES}"
        assert sorted(archived) == sorted(entries)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        kill9(proc)
        server.stop()
