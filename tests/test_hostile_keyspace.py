"""Key flooding: a cap on tracked DLQs with turns, cheap idleness, series that go away, byte-exact names."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import time
from pathlib import Path

import httpx
import redis
import redis.asyncio as aioredis

from bridge.core import names
from bridge.runtime import open_runtime
from bridge.settings import SourcesSettings
from bridge.sources.redis_list import RedisListSource
from bridge.sources.tracking import SourceTracker
from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port


def test_every_busy_dlq_gets_a_turn_under_the_cap() -> None:
    tracker = SourceTracker(max_sources=3, sticky_s=600)
    busy = [f"dead_letter:q{i}" for i in range(10)]
    served: set[str] = set()
    for scan in range(40):
        tracker.scan(busy, now=float(scan))
        assert len(tracker.sources) <= 3
        assert tracker.waiting == 10 - len(tracker.sources)
        served |= set(tracker.sources)
    assert served == set(busy), "no DLQ waits forever"


def test_drained_dlqs_make_room_first_and_leave_after_the_sticky_window() -> None:
    tracker = SourceTracker(max_sources=2, sticky_s=10)
    tracker.scan(["dead_letter:a", "dead_letter:b"], now=0)
    tracker.cool("dead_letter:a")  # drained: Redis deleted it
    tracker.scan(["dead_letter:b", "dead_letter:c"], now=1)
    assert tracker.sources == ["dead_letter:b", "dead_letter:c"] and tracker.waiting == 0
    tracker.scan([], now=5)
    assert tracker.sources == ["dead_letter:b", "dead_letter:c"], "drained DLQs stay while nobody waits"
    tracker.scan([], now=11.5)
    assert tracker.sources == []


async def test_non_utf8_and_control_dlq_names_are_claimed_byte_exact(aredis: aioredis.Redis) -> None:
    dlq_names = [b"dead_letter:\xff\xfe", b"dead_letter:red\x1b[31m\n"]
    for name in dlq_names:
        await aredis.lpush(name, b'{"job_id": "x"}')
    src = RedisListSource(aredis, SourcesSettings(), "c1")
    await src.rescan()
    claimed = [await src.claim(), await src.claim()]
    assert all(c is not None for c in claimed)
    for c in claimed:
        assert c is not None and await src.finish(c)
    for name in dlq_names:
        assert not await aredis.exists(name)
        assert await aredis.lrange(names.encode(keys.alerted(names.decode(name))), 0, -1) == [b'{"job_id": "x"}']
    shown = sorted(names.display(c.source_key) for c in claimed if c is not None)
    assert shown == sorted(["dead_letter:red\\u001b[31m\\u000a", "dead_letter:\\xff\\xfe"])


async def test_an_idle_bridge_does_not_poll_every_drained_dlq(
    aredis: aioredis.Redis, clean_redis: redis.Redis, make_settings  # type: ignore[no-untyped-def]
) -> None:
    """500 drained DLQs: the claim loop probes a few per round and blocks, instead of LMOVE-ing all 500."""
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(500):
            pipe.lpush(f"dead_letter:idle-{i}", json.dumps({"job_id": f"i{i}"}))
        pipe.execute()
    settings = make_settings(sources={"poll_interval_s": 0.05, "rescan_interval_s": 2.0})
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        stop = asyncio.Event()
        task = asyncio.create_task(runtime.pipeline.run(stop))
        deadline = time.monotonic() + 60
        while runtime.pipeline.processed < 500 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert runtime.pipeline.processed == 500
        await asyncio.sleep(0.5)
        clean_redis.config_resetstat()
        await asyncio.sleep(2.0)
        stats = clean_redis.info("commandstats")
        stop.set()
        await task
    moves = stats.get("cmdstat_lmove", {}).get("calls", 0) + stats.get("cmdstat_blmove", {}).get("calls", 0)
    assert moves < 1000, f"{moves} claim attempts in 2 s of idleness over 500 drained DLQs"
    assert len(runtime.source.sources) == 500, "drained DLQs stay tracked (sticky)"


def test_over_the_cap_dlqs_wait_their_turn_visibly_and_all_drain(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    gateway = FakeGateway(latency_s=0.4)
    queues = [f"dead_letter:capped-{i}" for i in range(8)]
    for q in queues:
        clean_redis.lpush(q, *[json.dumps({"job_id": f"{q}-{j}", "job_name": f"n{j}"}) for j in range(2)])
    port = free_port()
    with ThreadedServer(gateway.app()) as gw:
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "capped-1"},
            "sources": {"max_sources": 3, "concurrency": 2, "rescan_interval_s": 0.3},
            "openclaw": {"url": gw.url, "token": "t", "calls_per_minute": 0},
        })
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            wait_healthz(port, proc)
            seen_waiting = wait_for(lambda: _waiting(port) > 0, 10, 0.1)
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            depth_series = [ln for ln in metrics.splitlines() if ln.startswith("dlq_bridge_dlq_depth{")]
            done = wait_for(lambda: sum(clean_redis.llen(keys.alerted(q)) for q in queues) == 16, 60, 0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert seen_waiting, "DLQs over the cap are reported in /healthz"
    assert "dlq_bridge_sources_waiting" in metrics
    assert 0 < len(depth_series) <= 3
    assert done, "every DLQ over the cap is drained in its turn"


def _waiting(port: int) -> int:
    body = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
    check = body["checks"].get("sources", {})
    if check.get("status") != "degraded":
        return 0
    return int(check["detail"].split()[0])


def test_depth_series_of_a_gone_dlq_is_removed_after_the_sticky_window_and_names_are_escaped(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    receiver = Receiver()
    with ThreadedServer(receiver.app) as hook:
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "series-1"},
            "sources": {"sticky_s": 1.5, "rescan_interval_s": 0.2},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{hook.url}/hook", "secret": "s"}],
        })
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            wait_healthz(port, proc)
            clean_redis.lpush(b"dead_letter:\xff\xfe", json.dumps({"job_id": "bytes-1"}))
            clean_redis.lpush("dead_letter:gone", json.dumps({"job_id": "gone-1"}))
            assert wait_for(lambda: len(receiver.requests) == 2, 15)
            shown = _metrics(port)
            assert 'dlq_bridge_dlq_depth{source="dead_letter:\\\\xff\\\\xfe"}' in shown
            assert wait_for(lambda: "dlq_bridge_dlq_depth{" not in _metrics(port), 10)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    bodies = {json.loads(r.body)["job_id"]: json.loads(r.body) for r in receiver.requests}
    assert bodies["bytes-1"]["source_key"] == "dead_letter:\\xff\\xfe"
    assert clean_redis.llen(names.encode(keys.alerted(names.decode(b"dead_letter:\xff\xfe")))) == 1


def _metrics(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
