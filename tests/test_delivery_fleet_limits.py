"""Rate limits are fleet-wide: 3 real processes share one receiver's limit and its 429 holds."""

from __future__ import annotations

import asyncio
import bisect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.hold import SharedHold
from bridge.stores.limits import HEADROOM, RateLimiter, receiver_ref
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

ROOT = Path(__file__).resolve().parents[1]
RATE = 4.0  # per second: a fast "Slack" keeps the test short; the bench runs the real 1/s
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "max_attempts": 10, "request_timeout_s": 5.0}


def max_in_any_window(times: list[float], window_s: float = 1.0) -> int:
    """The most arrivals in any `window_s`-long sliding window."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window_s) - i for i, t in enumerate(ordered)), default=0)


async def run_children(
    config: Path, sink: str, count: int, processes: int = 3, spacing_s: float = 0.0
) -> list[dict[str, Any]]:
    """`processes` replicas, each delivering `count` alerts of its own to `sink` at once
    (or one every `spacing_s`)."""
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.deliver_child", str(config), sink, f"p{n}", str(count),
            str(spacing_s), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        )
        for n in range(processes)
    ]
    outputs = await asyncio.gather(*(asyncio.wait_for(c.communicate(), 120) for c in children))
    assert all(c.returncode == 0 for c in children)
    return [json.loads(out.splitlines()[-1]) for out, _err in outputs]


def slack_config(make_settings: Callable[..., Settings], tmp_path: Path, url: str) -> Path:
    make_settings(
        sinks=[{"name": "slack", "type": "slack", "url": f"{url}/hook", "messages_per_second": RATE}],
        delivery=FAST,
    )
    return tmp_path / "bridge.toml"


async def test_three_processes_together_stay_under_the_receiver_limit(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as url:
        reports = await run_children(slack_config(make_settings, tmp_path, url), "slack", 6)
    arrivals = [r.at for r in receiver.requests]
    assert len(arrivals) == 18 and all(r.status == 200 for r in receiver.requests)
    assert [o for r in reports for o in r["outcomes"]] == ["delivered"] * 18
    assert max_in_any_window(arrivals) <= RATE
    # Spread over the fleet: every process waited its turn at least once, and it shows in metrics.
    assert all(r["waits"] >= 1 and r["wait_seconds"] > 0 for r in reports)


async def test_a_429_seen_by_one_process_holds_every_process(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    receiver = Receiver(script=[Reply(), Reply(429, {"Retry-After": "2"}, body="rate_limited")])
    async with serve(receiver.app) as url:
        reports = await run_children(slack_config(make_settings, tmp_path, url), "slack", 3)
    statuses = [r.status for r in receiver.requests]
    assert statuses.count(429) == 1 and statuses.count(200) == 9
    assert sorted(o for r in reports for o in r["outcomes"]) == ["delivered"] * 9
    limited = next(r.at for r in receiver.requests if r.status == 429)
    later = [r.at for r in receiver.requests if r.at > limited]
    assert later and min(later) - limited >= 1.9, "another replica sent during the Retry-After hold"


async def test_a_webhook_s_429_holds_every_process_though_webhooks_are_not_paced(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    """Each replica sends one alert every 0.25 s; one gets 429 Retry-After: 3. The others learn
    of the hold within a second (`bridge/stores/hold.py`) and send nothing more until it ends."""
    receiver = Receiver(script=[Reply(), Reply(), Reply(429, {"Retry-After": "3"})])
    async with serve(receiver.app) as url:
        make_settings(sinks=[{"name": "api", "type": "webhook", "url": f"{url}/in", "secret": "s"}], delivery=FAST)
        reports = await run_children(tmp_path / "bridge.toml", "api", 12, spacing_s=0.25)
    assert sorted(o for r in reports for o in r["outcomes"]) == ["delivered"] * 36
    limited = next(r.at for r in receiver.requests if r.status == 429)
    during = [round(r.at - limited, 2) for r in receiver.requests if limited + 1.3 < r.at < limited + 2.9]
    after = [r.at for r in receiver.requests if r.at >= limited + 2.9]
    assert not during, f"a replica sent during the hold, {during} s after the 429"
    assert after, "the replicas went on once the hold ended"


async def test_an_unheld_webhook_costs_one_redis_read_a_second_not_one_per_delivery(aredis: aioredis.Redis) -> None:
    now = [100.0]
    hold = SharedHold(aredis, receiver_ref("webhook", "https://api.internal/x"), clock=lambda: now[0])

    async def evals() -> int:
        stats = await aredis.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))

    before = await evals()
    waits = [await hold.wait() for _ in range(50)]
    now[0] += 1.0
    waits += [await hold.wait() for _ in range(50)]
    assert waits == [0.0] * 100
    assert await evals() - before == 2, "one read per refresh_s"


async def test_the_limit_key_names_the_receiver_by_hash_never_by_secret(
    aredis: aioredis.Redis,
) -> None:
    secret = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    limiter = RateLimiter(aredis, receiver_ref("slack", secret), 1.0)
    assert await limiter.wait() == 0.0  # the first send never waits
    names = [k.decode() async for k in aredis.scan_iter(match="dlq_bridge:limit:*")]
    assert names == [keys.limit(receiver_ref("slack", secret))]
    assert "SECRET" not in names[0] and names[0].count("{") == 1
    assert limiter.interval_s == pytest.approx(1.0 + HEADROOM)


async def test_a_hold_is_capped_at_max_retry_after(aredis: aioredis.Redis) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await aredis.delete(limiter.key)  # time "passes": the hold is over

    limiter = RateLimiter(aredis, "slack:abc", 1.0, max_hold_s=5.0, sleep=sleep)
    await limiter.hold(3600)
    assert 4.0 < await aredis.pttl(limiter.key) / 1000 <= 6.0
    await limiter.wait()
    assert len(slept) == 1 and 4.5 < slept[0] <= 5.0


def unreachable_redis() -> aioredis.Redis:
    """A client of a port nothing listens on, failing at once (no retries)."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    from tests.support.redis_server import free_port

    return aioredis.Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))


async def test_without_redis_the_limiter_paces_in_process() -> None:
    dead = unreachable_redis()
    limiter = RateLimiter(dead, "slack:down", 10.0)
    try:
        waits = [await limiter.wait() for _ in range(3)]
        await limiter.hold(0.3)
        held = await limiter.wait()
    finally:
        await dead.aclose()
    assert waits[0] < 0.05 and waits[2] > 0.05  # spaced by 1.1 / 10 s, in this process
    assert held >= 0.2


async def test_without_redis_a_webhook_s_hold_stays_in_process(caplog: pytest.LogCaptureFixture) -> None:
    dead = unreachable_redis()
    hold = SharedHold(dead, "webhook:down")
    try:
        free = await hold.wait()
        await hold.hold(0.3)
        held = await hold.wait()
    finally:
        await dead.aclose()
    assert free == 0.0 and 0.2 <= held <= 0.3
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["receiver hold in Redis unavailable (ConnectionError); held in process only"], \
        "the hold says so once; the reads before it stay quiet"
