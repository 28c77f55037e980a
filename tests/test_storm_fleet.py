"""Storms through running `dlq-bridge run` processes (issue 11): grouping fleet-wide, kill -9 of a group's sender.

Issue 25's outage storm (one cause over 12 queues and three kinds) is tests/test_storm_outage.py.

Real Redis, real local receivers, real bridge processes; short group timers so
the storm's whole life fits in a test (docs/design.md, section 5b).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.stores import keys
from tests.support.bridge_process import kill9, remaining, start_bridge, write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = pytest.mark.failure

CAUSES = {
    "payments": ("charge_card", "ConnectionRefusedError: payments-api:8443 refused connection (request {i})"),
    "emails": ("send_receipt", "TimeoutError: smtp.internal:25 timed out after 30s (message {i})"),
}


def entries(queue: str, n: int) -> list[str]:
    job_name, error = CAUSES[queue]
    return [json.dumps({"queue": queue, "job_id": f"{queue}-{i}", "job_name": job_name,
                        "last_error": error.format(i=i)}) for i in range(n)]


def grouped(**timers: float) -> dict[str, Any]:
    return {"group_wait_s": 1, "group_interval_s": 2, "repeat_interval_s": 3600, **timers}


def config(tmp_path: Path, redis_url: str, consumer: str, sinks: list[dict[str, Any]], **delivery: Any) -> Path:
    return write_config(
        tmp_path / f"{consumer}.toml",
        {
            "server": {"port": free_port(), "grace_s": 5},
            "redis": {"url": redis_url, "consumer_id": consumer},
            "sources": {"concurrency": 8, "poll_interval_s": 0.01, "heartbeat_interval_s": 0.5,
                        "heartbeat_ttl_s": 2, "reap_interval_s": 0.5},
            "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.1, "lease_s": 2, "reservation_ttl_s": 2,
                         **delivery},
            "sinks": sinks,
        },
    )


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float, procs: list[Any]) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return True
        for proc in procs:
            if proc.poll() is not None and proc.returncode != -9:
                raise AssertionError(f"a replica exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        await asyncio.sleep(0.1)
    return False


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            assert proc.wait(timeout=20) in (0, -9)
        finally:
            kill9(proc)


def cause_of(body: str) -> str:
    [cause] = [q for q in CAUSES if q in body]
    return cause


def in_all(text: str) -> int:
    """Jobs in the group, from a Slack digest's fallback text ("N jobs failed …" / "N more since …, M in all")."""
    match = re.search(r"([\d,]+) in all", text) or re.search(r"([\d,]+) jobs failed", text)
    assert match, text
    return int(match.group(1).replace(",", ""))


async def test_a_storm_through_two_replicas_pages_once_per_cause_and_delivers_every_job_once(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    per_cause = 100
    pushed = {q: entries(q, per_cause) for q in CAUSES}
    slack, pagerduty, hook = Receiver(), Receiver(default=Reply(202)), Receiver()
    procs: list[subprocess.Popen[bytes]] = []
    async with serve(slack.app) as s, serve(pagerduty.app) as p, serve(hook.app) as h:
        sinks = [
            {"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", "messages_per_second": 20, **grouped()},
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue", **grouped()},
            {"name": "api", "type": "webhook", "url": f"{h}/hooks", "secret": "storm-secret"},
        ]
        procs = [start_bridge(["--config", str(config(tmp_path, redis_url, f"storm-{n}", sinks)), "run"])
                 for n in range(2)]
        try:
            for queue, batch in pushed.items():
                await aredis.lpush(f"dead_letter:{queue}", *batch)

            def last_counts(requests: list[Any], count: Callable[[dict[str, Any]], int]) -> dict[str, int]:
                out: dict[str, int] = {}
                for r in requests:
                    body = json.loads(r.body)
                    out[cause_of(json.dumps(body))] = count(body)
                return out

            async def settled() -> bool:
                archived = [await aredis.llen(keys.alerted(f"dead_letter:{q}")) for q in CAUSES]
                return (
                    archived == [per_cause] * len(CAUSES)
                    and await remaining(aredis, "dead_letter:payments") == 0
                    and last_counts(slack.requests, lambda b: in_all(b["text"])) == dict.fromkeys(CAUSES, per_cause)
                    and last_counts(pagerduty.requests, lambda b: b["payload"]["custom_details"]["count"])
                    == dict.fromkeys(CAUSES, per_cause)
                    and len(hook.requests) >= per_cause * len(CAUSES)
                )

            assert await wait_for(settled, 90, procs), (
                f"not settled: slack {len(slack.requests)}, pagerduty {len(pagerduty.requests)}, "
                f"webhook {len(hook.requests)}")
            await asyncio.sleep(3)  # a group_interval and more: nothing else may come
        finally:
            stop(procs)

    for queue, batch in pushed.items():
        got = await aredis.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1)
        assert sorted(g.decode() for g in got) == sorted(batch), "every entry archived exactly once"

    jobs = Counter(json.loads(r.body)["job_id"] for r in hook.requests if r.status < 300)
    assert set(jobs) == {f"{q}-{i}" for q in CAUSES for i in range(per_cause)}
    assert set(jobs.values()) == {1}, "the webhook (group_by none) gets every job exactly once"

    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in pagerduty.requests:
        event = json.loads(r.body)
        events[event["payload"]["custom_details"]["first_job"]["queue"]].append(event)
    for sent in events.values():
        assert {e["dedup_key"] for e in sent} == {sent[0]["dedup_key"]}, "one PagerDuty alert per cause"
        details = [e["payload"]["custom_details"] for e in sent]
        assert [d["notification"] for d in details] == [f"digest #{n + 1}" for n in range(len(sent))], (
            "each notification sent once, in order")
        assert all(d["new_count"] > 0 for d in details), "a later event only when the group grew"
        assert sum(d["new_count"] for d in details) == per_cause
    assert set(events) == set(CAUSES) and len({e[0]["dedup_key"] for e in events.values()}) == len(CAUSES)

    cards: dict[str, list[int]] = defaultdict(list)
    for r in slack.requests:
        text = json.loads(r.body)["text"]
        cards[cause_of(text)].append(in_all(text))
    assert set(cards) == set(CAUSES)
    for counts in cards.values():
        assert counts == sorted(set(counts)), f"one digest, then only growth digests: {counts}"
    print(f"\nstorm: slack cards {dict(cards)}; pagerduty events per cause "
          f"{ {q: len(e) for q, e in events.items()} }; webhook {len(hook.requests)}")


async def test_a_replica_killed_9_mid_notification_leaves_the_group_to_another_replica(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Replica A claims the group and posts its card; Slack never answers; A is killed -9.

    Once A's group lease and ledger reservation run out, replica B sends that
    same notification; nothing is stuck and nothing else is sent.
    """
    batch = entries("payments", 20)
    slack = Receiver(script=[Reply(delay_s=15)])  # A's post hangs until A is dead
    source = "dead_letter:payments"
    async with serve(slack.app) as s:
        sinks = [{"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", "messages_per_second": 20,
                  **grouped(group_wait_s=0.5, group_interval_s=1)}]
        a = start_bridge(["--config", str(config(tmp_path, redis_url, "replica-a", sinks,
                                                 request_timeout_s=60)), "run"])
        procs = [a]
        try:
            await aredis.lpush(source, *batch)

            async def a_is_posting() -> bool:
                return len(slack.requests) == 1 and await aredis.llen(keys.alerted(source)) == len(batch)

            assert await wait_for(a_is_posting, 30, procs)
            kill9(a)
            [(_group, until)] = await aredis.zrange(keys.groups_due("slack"), 0, -1, withscores=True)
            assert float(until) > time.time(), "the dead replica still holds the group"
            b = start_bridge(["--config", str(config(tmp_path, redis_url, "replica-b", sinks)), "run"])
            procs.append(b)
            assert await wait_for(lambda: _true(len(slack.requests) >= 2), 30, procs), "the group was left stuck"
            await asyncio.sleep(2)  # a group_interval and more: nothing else may come
        finally:
            stop(procs)
    texts = [json.loads(r.body)["text"] for r in slack.requests]
    assert len(texts) == 2 and "more since" not in texts[1], f"B sent A's notification, once: {texts}"
    assert in_all(texts[1]) == len(batch)
    assert await remaining(aredis, source) == 0
    assert await aredis.llen(keys.UNDELIVERABLE) == 0


async def _true(value: bool) -> bool:
    return value


async def test_a_critical_dead_letter_of_a_new_cause_is_not_held_behind_a_storm(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Mid-storm, a critical dead letter of a third cause: the webhook takes it before the backlog
    (severity first), and Slack and PagerDuty page it while that backlog is still being delivered."""
    storm = entries("payments", 400)
    slack, pagerduty, hook = Receiver(), Receiver(default=Reply(202)), Receiver(default=Reply(delay_s=0.1))
    critical = json.dumps({"queue": "ledger", "job_id": "ledger-crit", "job_name": "post_batch",
                           "last_error": "IntegrityError: duplicate key in ledger_pkey"})
    procs: list[subprocess.Popen[bytes]] = []
    async with serve(slack.app) as s, serve(pagerduty.app) as p, serve(hook.app) as h:
        sinks = [
            {"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", **grouped()},
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue", **grouped()},
            {"name": "api", "type": "webhook", "url": f"{h}/hooks", "secret": "storm-secret"},
        ]
        for n in range(2):
            path = config(tmp_path, redis_url, f"crit-{n}", sinks, sink_concurrency=2)
            with path.open("a") as toml:
                toml.write('[severity]\ndefault = "info"\n"ledger" = "critical"\n')
            procs.append(start_bridge(["--config", str(path), "run"]))
        try:
            await aredis.lpush("dead_letter:payments", *storm)
            assert await wait_for(lambda: _true(len(hook.requests) >= 20), 60, procs)
            await aredis.lpush("dead_letter:ledger", critical)
            # A new DLQ is found by the next SCAN (rescan_interval_s); from its hand-off on, it goes first.
            assert await wait_for(lambda: _llen_is(aredis, keys.alerted("dead_letter:ledger"), 1), 30, procs)
            before = len(hook.requests)

            def paged(receiver: Receiver) -> bool:
                return any(b"ledger-crit" in r.body for r in receiver.requests)

            assert await wait_for(lambda: _true(paged(slack) and paged(pagerduty)), 60, procs)
            assert await wait_for(lambda: _true(len(hook.requests) >= len(storm) + 1), 90, procs)
        finally:
            stop(procs)
    order = [json.loads(r.body)["job_id"] for r in hook.requests]
    position = order.index("ledger-crit") - before
    assert position <= 8, f"once handed off, the critical alert waited behind {position} alerts at the webhook"
    last_storm_job = max(r.at for r in hook.requests if b"ledger-crit" not in r.body)
    for name, receiver in (("Slack", slack), ("PagerDuty", pagerduty)):
        [page] = [r for r in receiver.requests if b"ledger-crit" in r.body]
        assert page.at < last_storm_job, f"{name} paged only after the storm's backlog was delivered"


async def _llen_is(client: aioredis.Redis, key: str, n: int) -> bool:
    return int(await client.llen(key)) == n
