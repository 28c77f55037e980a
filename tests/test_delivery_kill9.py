"""kill -9 in the middle of webhook deliveries, then restart: nothing lost, no unmarked duplicate."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bridge.stores import keys
from tests.support.bridge_process import archived, kill_at_random_points, remaining, run_until, write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

ENTRIES = 120
SOURCE = "dead_letter:kill9-hooks"


def config(tmp_path: Path, redis_url: str, hook_url: str) -> Path:
    return write_config(
        tmp_path / "bridge.toml",
        {
            "server": {"port": free_port(), "grace_s": 5},
            "redis": {"url": redis_url, "consumer_id": "kill9-hooks"},
            "sources": {"concurrency": 8, "poll_interval_s": 0.01},
            "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0},
            "sinks": [{"name": "api", "type": "webhook", "url": hook_url, "secret": "kill9-secret"}],
        },
    )


async def test_kill9_mid_delivery_then_restart(aredis: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    entries = [json.dumps({"queue": "kq", "job_id": f"k{i}", "last_error": f"E{i}"}) for i in range(ENTRIES)]
    await aredis.lpush(SOURCE, *entries)
    # Slow-ish answers, and some 503s, so kills land between sends, retries and ledger writes.
    receiver = Receiver(
        script=[Reply(503) if i % 7 == 0 else Reply(delay_s=0.02) for i in range(400)], default=Reply(delay_s=0.01)
    )
    async with serve(receiver.app) as base:
        cfg = config(tmp_path, redis_url, f"{base}/hooks")
        kills = await kill_at_random_points(
            cfg, lambda: len(receiver.requests), until=ENTRIES - 20, rng=random.Random(4), step=(5, 25)
        )

        async def drained() -> bool:
            return await archived(aredis, SOURCE) >= ENTRIES and not await remaining(aredis, SOURCE)

        assert await run_until(cfg, drained) == 0
    assert kills >= 3

    by_job: dict[str, list[tuple[str, str, bytes]]] = defaultdict(list)
    for request in receiver.requests:
        body = json.loads(request.body)
        by_job[body["job_id"]].append((request.headers["idempotency-key"], request.headers["webhook-id"], request.body))
    assert set(by_job) == {f"k{i}" for i in range(ENTRIES)}, "every entry reached the receiver"
    for job_id, seen in by_job.items():
        assert {k for k, _, _ in seen} == {f"kill9-hooks:{job_id}"}, "a re-send carries the same Idempotency-Key"
        assert len({w for _, w, _ in seen}) == 1 and len({b for _, _, b in seen}) == 1
    assert await archived(aredis, SOURCE) == ENTRIES and await remaining(aredis, SOURCE) == 0
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    accepted = defaultdict(int)
    for request in receiver.requests:
        if 200 <= request.status < 300:
            accepted[json.loads(request.body)["job_id"]] += 1
    assert len(accepted) == ENTRIES, "every entry was accepted (2xx) at least once"
    twice = sum(1 for n in accepted.values() if n > 1)
    print(
        f"\nkill9: kills={kills} requests={len(receiver.requests)} entries={ENTRIES} "
        f"accepted twice (same Idempotency-Key)={twice}"
    )
