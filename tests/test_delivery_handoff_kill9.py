"""kill -9 during hand-offs and sink deliveries, then restart: every entry archived once, every alert delivered."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from bridge.stores import keys
from tests.support.bridge_process import archived, kill_at_random_points, remaining, run_until, write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

ENTRIES = 150
QUEUE = "kill9-handoff"
SOURCE = f"dead_letter:{QUEUE}"


def config(tmp_path: Path, redis_url: str, slack_url: str, hook_url: str) -> Path:
    return write_config(
        tmp_path / "bridge.toml",
        {
            "server": {"port": free_port(), "grace_s": 5},
            "redis": {"url": redis_url, "consumer_id": "kill9-handoff"},
            "sources": {"concurrency": 8, "poll_interval_s": 0.01},
            "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "lease_s": 2},
            "sinks": [
                {"name": "slack", "type": "slack", "group_by": "none", "url": slack_url, "messages_per_second": 40},
                {"name": "api", "type": "webhook", "url": hook_url, "secret": "kill9-secret"},
            ],
        },
    )


async def feed(client: aioredis.Redis, entries: list[str], low: int = 5, chunk: int = 10) -> None:
    """Push `entries` `chunk` at a time, whenever fewer than `low` wait in the DLQ."""
    for start in range(0, len(entries), chunk):
        while await client.llen(SOURCE) >= low:
            await asyncio.sleep(0.002)
        await client.lpush(SOURCE, *entries[start : start + chunk])


async def test_kill9_mid_handoff_and_mid_delivery_loses_and_doubles_nothing(
    aredis: aioredis.Redis, clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    entries = [json.dumps({"queue": QUEUE, "job_id": f"h{i}", "last_error": f"E{i}"}) for i in range(ENTRIES)]
    # Fed a few at a time: a hand-off takes well under a millisecond, so a DLQ holding all 150
    # could be archived between two polls of a busy test loop, and no kill would land mid-drain.
    feeder = asyncio.create_task(feed(aredis, entries))
    slack = Receiver(default=Reply(delay_s=0.01))
    hook = Receiver(script=[Reply(503) if i % 9 == 0 else Reply(delay_s=0.01) for i in range(300)])
    async with serve(slack.app) as s, serve(hook.app) as h:
        cfg = config(tmp_path, redis_url, f"{s}/services/T/B/X", f"{h}/hooks")
        kills = await kill_at_random_points(
            cfg, lambda: int(clean_redis.llen(keys.alerted(SOURCE))), until=ENTRIES - 20,
            rng=random.Random(11), step=(5, 30),
        )

        async def drained() -> bool:
            return await archived(aredis, SOURCE) >= ENTRIES and not await remaining(aredis, SOURCE)

        assert await run_until(cfg, drained) == 0
    await feeder
    assert kills >= 3
    got = await aredis.lrange(keys.alerted(SOURCE), 0, -1)
    assert sorted(g.decode() for g in got) == sorted(entries), "every entry archived exactly once"
    assert await remaining(aredis, SOURCE) == 0, "no alert left in an outbox or sink queue"
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    jobs = {f"h{i}" for i in range(ENTRIES)}
    hook_ok: dict[str, set[str]] = defaultdict(set)
    for request in hook.requests:
        if 200 <= request.status < 300:
            hook_ok[json.loads(request.body)["job_id"]].add(request.headers["idempotency-key"])
    assert set(hook_ok) == jobs, "every alert reached the webhook"
    bad = {job: k for job, k in hook_ok.items() if k != {f"{QUEUE}:{job}"}}
    assert not bad, f"a re-send carries the same Idempotency-Key: {list(bad.items())[:3]}"
    slack_jobs = [json.loads(r.body)["text"].rsplit(" ", 1)[-1].strip("()") for r in slack.requests]
    assert set(slack_jobs) == jobs, "every alert reached Slack"
    print(
        f"\nkill9 hand-off: kills={kills} entries={ENTRIES} webhook requests={len(hook.requests)} "
        f"slack requests={len(slack.requests)} slack repeats={len(slack_jobs) - len(set(slack_jobs))}"
    )
