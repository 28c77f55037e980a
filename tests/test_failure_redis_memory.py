"""Redis under maxmemory: a full Redis is said out loud and waited out; an evicting policy is refused.

Each test starts its own redis-server with `--maxmemory` (never the suite's shared one).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from bridge.clients.embedded import redis_server_binary
from bridge.stores import keys
from tests.support.bridge_process import kill9, start_bridge, wait_healthz, write_config
from tests.support.ops import clean_env
from tests.support.redis_server import free_port
from tests.test_failure_redis_restart import wait_until

pytestmark = pytest.mark.failure

SOURCE = "dead_letter:memory"
ENTRIES = 200


class MaxmemoryRedis:
    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="dlqb-maxmemory-")
        self.proc = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, *args],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def maxmemory_redis(request: pytest.FixtureRequest) -> Iterator[MaxmemoryRedis]:
    server = MaxmemoryRedis(*request.param)
    yield server
    server.stop()


def config(tmp_path: Path, server: MaxmemoryRedis, port: int, **redis_extra: object) -> Path:
    return write_config(tmp_path / "b.toml", {
        "server": {"port": port, "grace_s": 5},
        "redis": {"url": server.url, "consumer_id": "memory-1", **redis_extra},
        "sources": {"concurrency": 8, "reap_interval_s": 1.0},
    })


def get(port: int, path: str) -> httpx.Response | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=3)
    except httpx.HTTPError:
        return None


def fill(client: redis.Redis) -> int:
    """Write filler keys until Redis refuses: the number written."""
    blob = b"x" * 16384
    for i in range(100_000):
        try:
            client.set(f"filler:{i}", blob)
        except redis.exceptions.OutOfMemoryError:
            return i
    raise AssertionError("Redis never filled up")


def cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "--config", str(path), *args],
                          capture_output=True, text=True, env=clean_env(), timeout=60, check=False)


def redis_detail(response: httpx.Response) -> str:
    return str(response.json()["checks"]["redis"].get("detail", ""))


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("maxmemory_redis", [("--maxmemory", "8mb", "--maxmemory-policy", "noeviction")],
                         indirect=True)
def test_a_full_redis_is_said_and_waited_out_then_nothing_is_lost(
    tmp_path: Path, maxmemory_redis: MaxmemoryRedis
) -> None:
    client = maxmemory_redis.client
    entries = [json.dumps({"job_id": f"m{i}", "last_error": f"TimeoutError: {'e' * 1024} {i}"}).encode()
               for i in range(ENTRIES)]
    client.lpush(SOURCE, *entries)
    fillers = fill(client)
    port = free_port()
    log = tmp_path / "bridge.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bridge", "--config", str(config(tmp_path, maxmemory_redis, port)), "run"],
            env=clean_env(), stdout=subprocess.DEVNULL, stderr=err,
        )
    try:
        assert wait_until(lambda: (r := get(port, "/healthz")) is not None and r.status_code == 503
                          and redis_detail(r).startswith("out of memory (used "), 30), "healthz 503: out of memory"
        full_at = time.monotonic()
        response = get(port, "/healthz")
        assert response is not None and "of maxmemory 8.0 MiB" in redis_detail(response)
        livez = get(port, "/livez")
        assert livez is not None and livez.status_code == 200, "a full Redis is no reason to restart"
        metrics = get(port, "/metrics")
        assert metrics is not None and "dlq_bridge_redis_memory_max_bytes 8.388608e+06" in metrics.text
        time.sleep(12)
        held_s = time.monotonic() - full_at
        assert client.llen(SOURCE) == ENTRIES, "nothing is claimed while Redis is full"
        text = log.read_text()
        said = text.count("Redis is full")
        assert 1 <= said <= 2 + held_s // 10, text[-3000:]
        assert "OutOfMemoryError" not in text, text[-3000:]

        client.delete(*[f"filler:{i}" for i in range(fillers)])  # memory frees: no restart
        assert wait_until(lambda: (r := get(port, "/healthz")) is not None and r.status_code == 200, 30)
        assert wait_until(lambda: client.llen(keys.alerted(SOURCE)) == ENTRIES, 60)
        assert sorted(client.lrange(keys.alerted(SOURCE), 0, -1)) == sorted(entries), "0 lost"
        assert client.llen(SOURCE) == 0
        assert "Redis has room again" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        kill9(proc)


@pytest.mark.parametrize("maxmemory_redis", [("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")],
                         indirect=True)
def test_an_evicting_policy_fails_check_and_run_refuses_it(tmp_path: Path, maxmemory_redis: MaxmemoryRedis) -> None:
    path = config(tmp_path, maxmemory_redis, free_port())
    done = cli(path, "check", "--json")
    assert done.returncode == 1
    row = next(r for r in json.loads(done.stdout) if r["component"] == "redis memory")
    assert row["status"] == "FAIL"
    assert "maxmemory-policy allkeys-lru can evict any key" in row["detail"]
    assert "set maxmemory-policy noeviction" in row["detail"]
    run = cli(path, "run")
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("run: maxmemory-policy allkeys-lru can evict any key"), run.stderr
    assert lines[-1].endswith("(or [redis] allow_eviction = true to run anyway)")
    assert "Traceback" not in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("maxmemory_redis", [("--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru")],
                         indirect=True)
def test_volatile_lru_with_allow_eviction_runs_and_warns(tmp_path: Path, maxmemory_redis: MaxmemoryRedis) -> None:
    port = free_port()
    path = config(tmp_path, maxmemory_redis, port, allow_eviction=True)
    maxmemory_redis.client.lpush(keys.quarantine(SOURCE), b"held entry")
    done = cli(path, "check", "--json")
    rows = {r["component"]: r for r in json.loads(done.stdout)}
    assert rows["redis memory"]["status"] == "warn" and "volatile-lru" in rows["redis memory"]["detail"]
    assert rows["quarantine"]["status"] == "warn" and rows["quarantine"]["detail"].startswith("1 entries held")
    assert done.returncode == 0, done.stdout
    proc = start_bridge(["--config", str(path), "run"], env=clean_env())
    try:
        wait_healthz(port, proc)
        metrics = get(port, "/metrics")
        assert metrics is not None and "dlq_bridge_quarantine_depth 1.0" in metrics.text
        assert "dlq_bridge_redis_memory_max_bytes 6.7108864e+07" in metrics.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "maxmemory-policy volatile-lru can evict every key with a TTL" in err
        assert "running anyway because [redis] allow_eviction = true" in err
    finally:
        kill9(proc)


@pytest.mark.parametrize("maxmemory_redis", [("--rename-command", "CONFIG", "")], indirect=True)
def test_where_config_is_disabled_check_says_so_and_carries_on(
    tmp_path: Path, maxmemory_redis: MaxmemoryRedis
) -> None:
    path = config(tmp_path, maxmemory_redis, free_port())
    done = cli(path, "check", "--json")
    row = next(r for r in json.loads(done.stdout) if r["component"] == "redis memory")
    assert row["status"] == "ok"
    assert row["detail"].startswith("maxmemory-policy noeviction (CONFIG is disabled here: read from INFO memory)")
    assert done.returncode == 0, done.stdout
