"""kill -9 at random points while draining: every entry ends in the archive exactly once."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import pytest
import redis

from bridge.stores import keys
from tests.support.bridge_process import kill9, start_bridge, wait_healthz, write_config
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

ENTRIES = 300
SOURCES = ("dead_letter:crash-a", "dead_letter:crash-b")


def archived(client: redis.Redis) -> list[bytes]:
    return [e for s in SOURCES for e in client.lrange(keys.alerted(s), 0, -1)]


def remaining(client: redis.Redis) -> int:
    processing = sum(client.llen(k) for k in client.scan_iter(match="dlq_bridge:processing:*"))
    return sum(client.llen(s) for s in SOURCES) + processing


def config(tmp_path: Path, redis_url: str, port: int, concurrency: int = 16) -> Path:
    return write_config(
        tmp_path / "bridge.toml",
        {
            "server": {"port": port, "grace_s": 5},
            "redis": {"url": redis_url, "consumer_id": "crashy"},
            "sources": {"concurrency": concurrency, "poll_interval_s": 0.01},
        },
    )


def test_kill9_mid_drain_loses_and_duplicates_nothing(clean_redis: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    entries = [
        json.dumps({"job_id": f"j{i}", "queue": "crash", "last_error": f"E{i}"}).encode() for i in range(ENTRIES)
    ]
    for i, entry in enumerate(entries):
        clean_redis.lpush(SOURCES[i % 2], entry)
    port = free_port()
    cfg = config(tmp_path, redis_url, port)
    rng = random.Random(20261130)
    kills = 0
    while kills < 5 and len(archived(clean_redis)) < ENTRIES - 20:
        target = rng.randint(len(archived(clean_redis)) + 1, len(archived(clean_redis)) + 80)
        proc = start_bridge(["--config", str(cfg), "run"])
        deadline = time.monotonic() + 30
        while len(archived(clean_redis)) < target and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.002)
        kill9(proc)
        kills += 1
    assert kills >= 3, "the drain finished before enough kills happened"
    proc = start_bridge(["--config", str(cfg), "run"])
    wait_healthz(port, proc)
    deadline = time.monotonic() + 60
    while (len(archived(clean_redis)) < ENTRIES or remaining(clean_redis)) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    got = archived(clean_redis)
    assert sorted(got) == sorted(entries), f"lost {len(set(entries) - set(got))}, duplicated {len(got) - len(set(got))}"
    assert remaining(clean_redis) == 0


def test_restart_returns_own_processing_entries_before_claiming(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """One worker slot: the returned entry goes back to the claim end of its DLQ at start-up,
    before the claim loop runs, so it is processed before the entries that were waiting."""
    left_over = json.dumps({"job_id": "left-over", "queue": "crash"}).encode()
    waiting = [json.dumps({"job_id": f"new-{i}", "queue": "crash"}).encode() for i in range(3)]
    clean_redis.lpush(SOURCES[0], *waiting)
    clean_redis.lpush(keys.processing(SOURCES[0], "crashy"), left_over)
    clean_redis.set(keys.heartbeat("crashy"), "stale", ex=30)  # looks alive: only its own restart returns it
    port = free_port()
    proc = start_bridge(["--config", str(config(tmp_path, redis_url, port, concurrency=1)), "run"])
    wait_healthz(port, proc)
    deadline = time.monotonic() + 20
    while len(archived(clean_redis)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    log = proc.stderr.read().decode() if proc.stderr else ""
    assert "returned 1 entries from a previous run" in log, "start-up returned it (not the reaper)"
    # the archive is LPUSHed as entries finish: oldest last
    assert list(reversed(archived(clean_redis))) == [left_over, *waiting], "returned first, then claimed in order"
