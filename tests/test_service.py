"""The service as a user runs it: zero config, /healthz, /metrics, Redis outages, SIGTERM."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from bridge import keys
from bridge.embedded import redis_server_binary
from tests.support.bridge_process import kill9, start_bridge, wait_for, wait_healthz, write_config
from tests.support.redis_server import free_port, start_private_redis


def redis_cli() -> str:
    return shutil.which("redis-cli") or str(Path(redis_server_binary()).with_name("redis-cli"))


def test_demo_prints_a_card_for_every_sample_shape(tmp_path: Path) -> None:
    env = {"DLQ_BRIDGE_REDIS__EMBEDDED_PORT": str(free_port())}
    result = subprocess.run(
        [sys.executable, "-m", "bridge", "demo"],
        cwd=tmp_path,
        env={**_base_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("dlq-bridge alert") == 5
    for expected in (
        "charge_card failed after 5 attempts",
        "No error was recorded",
        "not UTF-8",
        "JSON array, not an object",
        "import_contacts",
    ):
        assert expected in out, expected
    assert "hunter2" not in out and "sk_live_abcdefghijklmnop" not in out
    assert "embedded Redis" in result.stderr
    assert (tmp_path / ".dlq-bridge" / "appendonly.aof").exists() or (
        tmp_path / ".dlq-bridge" / "appendonlydir"
    ).exists()


def test_demo_with_a_config_never_touches_the_configured_redis(tmp_path: Path, clean_redis: redis.Redis) -> None:
    """`--config` with a Redis URL: the demo still runs on the embedded Redis and drains only its samples."""
    real = json.dumps({"job_id": "prod-1", "last_error": "boom"})
    clean_redis.lpush("dead_letter:orders", real)
    url = clean_redis.connection_pool.connection_kwargs
    cfg = write_config(tmp_path / "bridge.toml", {"redis": {"url": f"redis://{url['host']}:{url['port']}/0"}})
    env = {"DLQ_BRIDGE_REDIS__EMBEDDED_PORT": str(free_port())}
    result = subprocess.run(
        [sys.executable, "-m", "bridge", "--config", str(cfg), "demo"],
        cwd=tmp_path, env={**_base_env(), **env}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("dlq-bridge alert") == 5 and "prod-1" not in result.stdout
    assert clean_redis.lrange("dead_letter:orders", 0, -1) == [real.encode()], "the real dead letter is untouched"
    assert sorted(k.decode() for k in clean_redis.keys("*")) == ["dead_letter:orders"], "nothing written there"


def _base_env() -> dict[str, str]:
    import os

    return dict(os.environ)


@pytest.mark.skipif(not shutil.which("redis-cli"), reason="redis-cli not installed")
def test_zero_config_run_serves_healthz_and_drains_redis_cli_pushes(tmp_path: Path) -> None:
    redis_port, http_port = free_port(), free_port()
    out = (tmp_path / "stdout").open("wb")
    env = {"DLQ_BRIDGE_REDIS__EMBEDDED_PORT": str(redis_port), "DLQ_BRIDGE_SERVER__PORT": str(http_port)}
    proc = start_bridge(["run"], cwd=tmp_path, env=env, stdout=out)
    try:
        body = wait_healthz(http_port, proc)
        assert body["status"] == "ok" and body["checks"]["redis"]["status"] == "ok"
        entry = json.dumps({"job_id": "cli-1", "job_name": "resize", "attempts": 2, "last_error": "boom"})
        subprocess.run(
            [redis_cli(), "-p", str(redis_port), "LPUSH", "dead_letter:images", entry], check=True, capture_output=True
        )
        assert wait_for(lambda: "id=cli-1" in (tmp_path / "stdout").read_text(), 10)
        metrics = httpx.get(f"http://127.0.0.1:{http_port}/metrics").text
        assert 'dlq_bridge_entries_total{outcome="alerted"} 1.0' in metrics
        assert "dlq_bridge_dlq_depth" in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not _answers(redis_port), "the embedded Redis should stop with the bridge"


def _answers(port: int) -> bool:
    from bridge.embedded import port_answers

    return port_answers(port)


@pytest.mark.failure
def test_healthz_turns_503_when_redis_stops_and_200_when_it_returns(tmp_path: Path) -> None:
    server = start_private_redis(appendonly=True)
    http_port = free_port()
    cfg = write_config(
        tmp_path / "b.toml",
        {
            "server": {"port": http_port},
            "redis": {"url": server.url, "consumer_id": "health-1", "socket_timeout_s": 1.0},
        },
    )
    proc = start_bridge(["--config", str(cfg), "run"])
    try:
        wait_healthz(http_port, proc)
        server.kill()
        started = time.monotonic()
        assert wait_for(lambda: _status(http_port) == 503, 10)
        assert time.monotonic() - started < 5
        body = httpx.get(f"http://127.0.0.1:{http_port}/healthz").json()
        assert body["checks"]["redis"]["status"] == "failing"
        server.start()
        assert wait_for(lambda: _status(http_port) == 200, 15)
        client = redis.Redis.from_url(server.url)
        client.lpush("dead_letter:after-outage", json.dumps({"job_id": "x"}))
        assert wait_for(lambda: client.llen(keys.alerted("dead_letter:after-outage")) == 1, 15)
    finally:
        kill9(proc)
        server.stop()


def _status(port: int) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=3).status_code
    except httpx.HTTPError:
        return 0


def test_sigterm_stops_claiming_and_exits_0_within_grace(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    http_port = free_port()
    cfg = write_config(
        tmp_path / "b.toml",
        {
            "server": {"port": http_port, "grace_s": 3},
            "redis": {"url": redis_url, "consumer_id": "term-1"},
            "sources": {"rescan_interval_s": 0.5},
        },
    )
    proc = start_bridge(["--config", str(cfg), "run"])
    wait_healthz(http_port, proc)
    clean_redis.lpush("dead_letter:t", *[json.dumps({"job_id": f"t{i}"}) for i in range(50)])
    assert wait_for(lambda: clean_redis.llen("dead_letter:t") == 0, 10)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 3 + 2
    assert clean_redis.llen(keys.alerted("dead_letter:t")) == 50
    assert clean_redis.get(keys.heartbeat("term-1")) is None, "a clean stop drops the heartbeat"
