"""kill -9 and SIGTERM mid-drain with the gateway and all three sinks live (subprocess bridge)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.stores import keys
from tests.support.bridge_process import (
    archived,
    kill_at_random_points,
    remaining,
    run_until,
    start_bridge,
    wait_healthz,
    write_config,
)
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

SOURCE = "dead_letter:kill-all"


def config(tmp_path: Path, redis_url: str, urls: dict[str, str], port: int, grace: float = 5) -> Path:
    return write_config(
        tmp_path / "bridge.toml",
        {
            "server": {"port": port, "grace_s": grace},
            "redis": {"url": redis_url, "consumer_id": "kill-all"},
            "sources": {"concurrency": 8, "poll_interval_s": 0.01},
            "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 3.0},
            "openclaw": {"url": urls["gateway"], "token": "gw-token", "timeout_s": 3.0},
            "sinks": [
                {
                    "name": "slack",
                    "type": "slack", "group_by": "none",
                    "url": f"{urls['slack']}/services/T/B/X",
                    "messages_per_second": 500,
                },
                {
                    "name": "pd",
                    "type": "pagerduty", "group_by": "none",
                    "routing_key": "k" * 32,
                    "events_url": f"{urls['pd']}/v2/enqueue",
                    "events_per_minute": 30000,
                },
                {"name": "hook", "type": "webhook", "url": f"{urls['hook']}/in", "secret": "kill-secret"},
            ],
        },
    )


def entries(count: int) -> list[str]:
    return [
        json.dumps(
            {
                "queue": "ka",
                "job_id": f"a{i}",
                "job_name": f"job{i % 7}",
                "attempts": 3,
                "last_error": f"RuntimeError: step {i % 5} failed",
            }
        )
        for i in range(count)
    ]


def keyed(receiver: Receiver, key_of: Any) -> dict[str, set[str]]:
    """Job id → the idempotency identities it arrived with (successful or not)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for request in receiver.requests:
        job, identity = key_of(request)
        seen[job].add(identity)
    return seen


async def test_kill9_with_gateway_and_all_sinks_loses_nothing(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    count = 150
    await aredis.lpush(SOURCE, *entries(count))
    gateway = FakeGateway(latency_s=0.01)
    slack = Receiver(default=Reply(delay_s=0.01))
    pd = Receiver(script=[Reply(503) if i % 9 == 0 else Reply(202) for i in range(300)], default=Reply(202))
    hook = Receiver(default=Reply(delay_s=0.02))
    async with serve(gateway.app()) as gw, serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        cfg = config(tmp_path, redis_url, {"gateway": gw, "slack": s, "pd": p, "hook": h}, free_port())
        kills = await kill_at_random_points(
            cfg, lambda: len(hook.requests), until=count - 25, rng=random.Random(11), step=(5, 30)
        )

        async def drained() -> bool:
            return await archived(aredis, SOURCE) >= count and not await remaining(aredis, SOURCE)

        assert await run_until(cfg, drained) == 0
    assert kills >= 3
    assert await archived(aredis, SOURCE) == count and await remaining(aredis, SOURCE) == 0
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    jobs = {f"a{i}" for i in range(count)}

    def hook_key(r: Any) -> tuple[str, str]:
        return json.loads(r.body)["job_id"], r.headers["idempotency-key"] + "|" + r.headers["webhook-id"]

    def pd_key(r: Any) -> tuple[str, str]:
        body = json.loads(r.body)
        return body["payload"]["custom_details"].get("job_id", body["dedup_key"]), body["dedup_key"]

    for name, seen in (("webhook", keyed(hook, hook_key)), ("pagerduty", keyed(pd, pd_key))):
        assert set(seen) == jobs, f"{name}: every entry arrived"
        assert all(len(identities) == 1 for identities in seen.values()), f"{name}: re-sends keep their key"
    slack_text = "\n".join(r.body.decode() for r in slack.requests)
    missing = [job for job in jobs if not re.search(rf"\b{job}\b", slack_text)]
    assert not missing, f"slack: cards missing for {missing[:5]}"
    assert gateway.calls >= 1


async def test_sigterm_mid_drain_exits_0_within_grace_and_the_rest_drains_after_restart(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    count, grace = 80, 2.0
    await aredis.lpush(SOURCE, *entries(count))
    # A gateway that takes 0.3 s a cause keeps the drain going (≈ 35 causes, 4 calls at a time)
    # while the first slow webhooks arrive: the SIGTERM lands mid-drain however fast the claims are.
    gateway = FakeGateway(latency_s=0.3)
    slow = Receiver(default=Reply(delay_s=0.3))
    quick = Receiver(default=Reply(202))
    port = free_port()
    async with serve(gateway.app()) as gw, serve(slow.app) as h, serve(quick.app) as q:
        cfg = config(tmp_path, redis_url, {"gateway": gw, "slack": q, "pd": q, "hook": h}, port, grace)
        proc = start_bridge(["--config", str(cfg), "run"])
        await asyncio.to_thread(wait_healthz, port, proc)
        while len(slow.requests) < 10:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, grace + 10) == 0
        stopped_in = time.monotonic() - started
        left = await remaining(aredis, SOURCE)
        assert left > 0, "the drain should have been cut short"

        async def drained() -> bool:
            return await archived(aredis, SOURCE) >= count and not await remaining(aredis, SOURCE)

        assert await run_until(cfg, drained, timeout_s=60) == 0
    assert stopped_in < grace + 2, f"took {stopped_in:.1f}s to stop with grace {grace}s"
    assert await archived(aredis, SOURCE) == count
    got = sorted(await aredis.lrange(keys.alerted(SOURCE), 0, -1))
    assert got == sorted(e.encode() for e in entries(count))
