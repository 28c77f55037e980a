"""Poison told from bystanders (docs/design.md, section 3b): real bridge processes, a real Redis.

A consumer's death is held against the one suspect it ran alone, never against everything it held:
a kill -9 loop quarantines no healthy entry, while a real poison pill (an entry whose intake kills
the process) is quarantined after `sources.quarantine_after` solo deaths and the rest keep flowing.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bridge.stores import keys
from tests.support.bridge_process import (
    kill9,
    run_until,
    start_bridge,
    terminate,
    undelivered,
    wait_healthz,
    write_config,
)
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.poison_bridge import POISON_MARK
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

ROOT = Path(__file__).resolve().parents[1]
DLQS = [f"dead_letter:loop-{n}" for n in range(4)]


def config(tmp_path: Path, redis_url: str, gateway: str, hook: str, port: int = 0) -> Path:
    return write_config(tmp_path / "bridge.toml", {
        "server": {"port": port or free_port(), "grace_s": 2},
        "redis": {"url": redis_url, "consumer_id": "kill-loop"},  # the same consumer id at every restart
        "sources": {"poll_interval_s": 0.01, "reap_interval_s": 1.0},  # concurrency 32, quarantine_after 3
        "openclaw": {"url": gateway, "token": "gw", "timeout_s": 5, "calls_per_minute": 0},
        "sinks": [{"name": "hook", "type": "webhook", "url": f"{hook}/in", "secret": "s"}],
    })


def word(n: int) -> str:
    """`n` in letters: fingerprints fold digits, and each entry should have its own failure."""
    return "".join("abcdefghij"[int(c)] for c in str(n))


def entry(dlq: int, n: int, extra: str = "") -> bytes:
    return json.dumps({"queue": f"loop-{dlq}", "job_id": f"q{dlq}-{n}", "job_name": f"job{n % 5}",
                       "attempts": 3, "last_error": f"RuntimeError: step {word(n)} failed{extra}"}).encode()


async def totals(client: aioredis.Redis) -> dict[str, int]:
    processing = [k async for k in client.scan_iter(match="dlq_bridge:processing:*")]
    return {
        "archived": sum([int(await client.llen(keys.alerted(d))) for d in DLQS]),
        "quarantined": sum([int(await client.llen(keys.quarantine(d))) for d in DLQS]),
        "waiting": sum([int(await client.llen(d)) for d in DLQS]),
        "held": sum([int(await client.llen(k)) for k in processing]),
        "undelivered": await undelivered(client),
    }


def delivered_jobs(hook: Receiver) -> Counter[str]:
    return Counter(json.loads(r.body)["job_id"] for r in hook.requests if r.status < 300)


@pytest.mark.timeout(300)  # nine restarts, and a drain of 400 entries with one model call each
async def test_a_kill9_loop_quarantines_no_healthy_entry_and_loses_none(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    per_dlq = 100
    for d, dlq in enumerate(DLQS):
        await aredis.lpush(dlq, *[entry(d, n) for n in range(per_dlq)])
    total = per_dlq * len(DLQS)
    gateway, hook = FakeGateway(latency_s=0.05), Receiver()  # one gateway call per entry (its own error)
    rng = random.Random(2121)
    kills = kills_holding = 0
    async with serve(gateway.app()) as gw, serve(hook.app) as h:
        port = free_port()
        cfg = config(tmp_path, redis_url, gw, h, port)
        while kills < 9 and (await totals(aredis))["archived"] < total - 40:
            proc = start_bridge(["--config", str(cfg), "run"])
            await asyncio.to_thread(wait_healthz, port, proc)  # up and draining
            await asyncio.sleep(rng.uniform(0.5, 2.0))
            kill9(proc)  # restarted at once, the same consumer id
            kills += 1
            kills_holding += (await totals(aredis))["held"] > 0

        async def drained() -> bool:
            t = await totals(aredis)
            return t["archived"] + t["quarantined"] >= total and not t["waiting"] + t["held"] + t["undelivered"]

        assert await run_until(cfg, drained, timeout_s=120) == 0
    figures = await totals(aredis)
    jobs = delivered_jobs(hook)
    duplicates = sum(jobs.values()) - len(jobs)
    print(f"\nkill loop: kills={kills} (holding entries: {kills_holding}) quarantined={figures['quarantined']} "
          f"lost={total - figures['archived'] - figures['quarantined']} duplicate deliveries={duplicates}")
    assert kills_holding >= 5, "the kills should land while entries are held"
    assert figures["quarantined"] == 0, "no healthy entry is quarantined for the bridge's own deaths"
    assert figures["archived"] == total and figures["waiting"] + figures["held"] == 0
    assert set(jobs) == {f"q{d}-{n}" for d in range(len(DLQS)) for n in range(per_dlq)}, "every job alerted"


def start_poisoned(cfg: Path) -> subprocess.Popen[bytes]:
    """The real bridge, whose intake of the poison pill kills it (tests/support/poison_bridge.py)."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.poison_bridge", "--config", str(cfg), "run"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.timeout(300)
async def test_a_real_poison_pill_is_quarantined_after_its_solo_deaths_and_the_rest_flow(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    per_dlq, limit = 60, 3
    pill = entry(0, 999, POISON_MARK.decode())
    await aredis.lpush(DLQS[0], *[entry(0, n) for n in range(per_dlq // 2)], pill,
                       *[entry(0, n) for n in range(per_dlq // 2, per_dlq)])
    await aredis.lpush(DLQS[1], *[entry(1, n) for n in range(per_dlq)])
    gateway, hook = FakeGateway(latency_s=0.02), Receiver()
    deaths = 0
    async with serve(gateway.app()) as gw, serve(hook.app) as h:
        cfg = config(tmp_path, redis_url, gw, h)
        while deaths <= limit + 2:
            proc = start_poisoned(cfg)
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                if await aredis.llen(keys.quarantine(DLQS[0])):
                    break
                await asyncio.sleep(0.05)
            if proc.poll() is None:  # quarantined (or stuck): a clean stop, then the rest drains
                # SIGTERM, not kill -9: an alert in flight at a kill is sent again on restart (at least
                # once, same Idempotency-Key), which would blur the 'one quarantine alert' count below.
                await asyncio.to_thread(terminate, proc, 20.0)
                break
            deaths += 1  # died of the pill: restarted at once

        async def drained() -> bool:
            t = await totals(aredis)
            return t["archived"] >= 2 * per_dlq and not t["waiting"] + t["held"] + t["undelivered"]

        assert await run_until(cfg, drained, timeout_s=120) == 0
    figures = await totals(aredis)
    print(f"\npoison pill: deaths={deaths} quarantined={figures['quarantined']} archived={figures['archived']}")
    assert await aredis.lrange(keys.quarantine(DLQS[0]), 0, -1) == [pill], "the pill, and only the pill"
    assert deaths <= limit + 1, "quarantined within quarantine_after solo deaths (after one as a bystander)"
    assert figures["archived"] == 2 * per_dlq, "every healthy entry finished"
    jobs = delivered_jobs(hook)
    assert {f"q{d}-{n}" for d in range(2) for n in range(per_dlq)} <= set(jobs)
    bodies = [json.loads(r.body) for r in hook.requests]
    titles = [b["summary"]["title"] for b in bodies if b["job_id"] == "quarantined:q0-999"]
    assert titles == ["Quarantined dead letter: processing failed 3 times"], "one quarantine alert, under its job id"
