"""The service as a user runs it: zero config, /healthz, /metrics, Redis outages, SIGTERM."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import redis

from bridge.clients.embedded import redis_server_binary
from bridge.stores import keys
from bridge.summarize.prompt import unwrap_dead_letter
from tests.support.bridge_process import kill9, start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver, Reply
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
    from bridge.clients.embedded import port_answers

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
        assert wait_for(lambda: _status(http_port) == 503, 10)
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
    """SIGTERM mid-drain: the entries in flight finish, nothing more is claimed, and entries pushed
    after the signal stay in the DLQ. A slow gateway (1 s a call) with two worker slots keeps entries
    in flight and most of the DLQ unclaimed when the signal lands; the hand-off makes the summary,
    not the sink, what an entry waits on while it is in flight."""
    gateway, hook = FakeGateway(latency_s=1.0), Receiver(default=Reply(delay_s=0.3))
    http_port, source = free_port(), "dead_letter:t"
    with ThreadedServer(gateway.app()) as gw, ThreadedServer(hook.app) as wh:
        cfg = write_config(
            tmp_path / "b.toml",
            {
                "server": {"port": http_port, "grace_s": 5},
                "redis": {"url": redis_url, "consumer_id": "term-1"},
                "sources": {"rescan_interval_s": 0.5, "concurrency": 2},
                "openclaw": {"url": gw.url, "token": "t", "calls_per_minute": 0},
                "sinks": [{"name": "hook", "type": "webhook", "url": f"{wh.url}/hook", "secret": "s"}],
            },
        )
        proc = start_bridge(["--config", str(cfg), "run"])
        wait_healthz(http_port, proc)
        early = [json.dumps({"job_id": f"t{i}", "last_error": f"cause {i}"}) for i in range(12)]
        clean_redis.lpush(source, *early)
        assert wait_for(lambda: gateway.in_flight > 0, 10), "an entry is in flight when the signal lands"
        proc.send_signal(signal.SIGTERM)
        in_flight = {_job_of(body) for body in list(gateway.bodies)}
        late = [json.dumps({"job_id": f"late{i}", "last_error": "after the signal"}) for i in range(5)]
        clean_redis.lpush(source, *late)
        assert proc.wait(timeout=5 + 10) == 0
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    archived = {json.loads(raw)["job_id"] for raw in clean_redis.lrange(keys.alerted(source), 0, -1)}
    waiting = {json.loads(raw)["job_id"] for raw in clean_redis.lrange(source, 0, -1)}
    assert in_flight and in_flight <= archived, "the entries in flight at the signal finished"
    assert "grace period over" not in stderr, "they finished within the grace period, none was cut"
    assert clean_redis.llen(keys.processing(source, "term-1")) == 0, "nothing left claimed"
    assert {f"late{i}" for i in range(5)} <= waiting, "entries pushed after the signal stay in the DLQ"
    assert waiting - {f"late{i}" for i in range(5)}, "claiming stopped: early entries were left unclaimed"
    assert archived.isdisjoint(waiting) and len(archived) + len(waiting) == 17, "each entry in one place"
    assert clean_redis.llen(keys.alerted(source)) == len(archived), "archived once each"
    assert clean_redis.get(keys.heartbeat("term-1")) is None, "a clean stop drops the heartbeat"


def _job_of(body: bytes) -> str:
    wrapped = unwrap_dead_letter(json.loads(body)["messages"][1]["content"])
    return str(json.loads(wrapped or "{}").get("job_id"))
