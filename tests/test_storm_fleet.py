"""Storms through running `dlq-bridge run` processes (issue 11): grouping fleet-wide, kill -9 of a group's sender.

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

import httpx
import pytest
import redis.asyncio as aioredis

from bridge import keys
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


OUTAGE = "ConnectionRefusedError: postgres-primary:5432 refused connection (order {i})"
LIST_QUEUES = [f"inventory-{n:02d}" for n in range(9)]
RQ_QUEUES = ["rq-reindex", "rq-export"]
WAVES, WAVE_S = 10, 3.0


def produce_peers(redis_url: str, per_queue: int) -> tuple[list[str], list[str]]:
    """Real RQ and Sidekiq workers fail `per_queue` jobs each with the outage's error (the peers installed)."""
    from tests.kinds import producers

    rq_queues = RQ_QUEUES if producers.rq_missing() is None else []
    for queue in rq_queues:
        producers.produce_rq(redis_url, queue, per_queue, job="sync_inventory")
    sidekiq_queues = ["sq-inventory"] if producers.sidekiq_missing() is None else []
    if sidekiq_queues:
        producers.produce_sidekiq(redis_url, per_queue, worker="SyncInventoryWorker", queue="sq-inventory")
    return rq_queues, sidekiq_queues


async def serving(port: int) -> bool:
    """True once the replica's HTTP server answers at all (its runtime is up)."""
    async with httpx.AsyncClient() as client:
        try:
            await client.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0)
        except httpx.HTTPError:
            return False
    return True


def outage_entries(queue: str, n: int) -> list[str]:
    return [json.dumps({"queue": queue, "job_id": f"{queue}-{i}", "job_name": "sync_inventory",
                        "last_error": OUTAGE.format(i=i)}) for i in range(n)]


def outage_config(tmp_path: Path, redis_url: str, consumer: str, sinks: list[dict[str, Any]],
                  rq_queues: list[str], sidekiq: bool, port: int) -> Path:
    sources: dict[str, Any] = {"concurrency": 8, "poll_interval_s": 0.01, "heartbeat_interval_s": 0.5,
                               "heartbeat_ttl_s": 2, "reap_interval_s": 0.5}
    sections: dict[str, Any] = {
        "server": {"port": port, "grace_s": 5},
        "redis": {"url": redis_url, "consumer_id": consumer},
        "sources": sources,
        "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.1, "lease_s": 2, "reservation_ttl_s": 2},
        "sinks": sinks,
    }
    if rq_queues:
        sections["sources.rq"] = [{"queues": rq_queues}]
    if sidekiq:
        sections["sources.sidekiq"] = [{"lease_s": 5}]
    return write_config(tmp_path / f"{consumer}.toml", sections)


async def test_an_outage_over_twelve_queues_and_three_kinds_is_one_incident_and_few_messages(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Issue 25's storm, scaled to a loaded 2-core machine: 9 list DLQs × 40 and (where the peers are
    installed) 2 RQ queues and 1 Sidekiq queue × 10 real failed jobs, 12 queues in all, the same
    connection error to one host, two replicas, Slack at
    1 message/s and PagerDuty at 120 events/min (their real limits), the list DLQs failing in 10
    waves over 30 s; one unrelated failure in one of those queues mid-outage. Expect 1 incident
    and at most 3 Slack messages for the outage, the unrelated failure alerted on its own, nothing
    lost."""
    per_list, per_peer = 40, 10
    rq_queues, sidekiq_queues = produce_peers(redis_url, per_peer)
    peer_queues = rq_queues + sidekiq_queues
    total = per_list * len(LIST_QUEUES) + per_peer * len(peer_queues)
    slack, pagerduty = Receiver(), Receiver(default=Reply(202))
    procs: list[subprocess.Popen[bytes]] = []
    timers = {"group_wait_s": 3, "group_interval_s": 20, "repeat_interval_s": 3600}
    async with serve(slack.app) as s, serve(pagerduty.app) as p:
        sinks = [
            {"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", "group_by": "cause", **timers},
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue", **timers},
        ]
        ports = [free_port() for _ in range(2)]
        procs = [start_bridge(["--config", str(outage_config(tmp_path, redis_url, f"outage-{n}", sinks, rq_queues,
                                                             bool(sidekiq_queues), port)),
                               "run"]) for n, port in enumerate(ports)]
        try:
            for port in ports:
                assert await wait_for(lambda port=port: serving(port), 60, procs), "a replica never served"
            started = time.monotonic()  # the outage as the bridges see it: the peers' stores are full already
            batches = {q: outage_entries(q, per_list) for q in LIST_QUEUES}
            unrelated_at = 0.0
            for wave in range(WAVES):  # the outage goes on for WAVES × WAVE_S seconds
                step = per_list // WAVES
                for queue in LIST_QUEUES:
                    await aredis.lpush(f"dead_letter:{queue}", *batches[queue][wave * step:(wave + 1) * step])
                if wave == WAVES // 2:
                    unrelated_at = time.monotonic()
                    await aredis.lpush("dead_letter:inventory-03", json.dumps({
                        "queue": "inventory-03", "job_id": "odd-1", "job_name": "price_update",
                        "last_error": "KeyError: 'sku-991' not in catalogue"}))
                await asyncio.sleep(WAVE_S)

            def outage(body: bytes) -> bool:
                return b"postgres-primary" in body

            def counted(r: Any) -> int:
                body = json.loads(r.body)
                return int(body["payload"]["custom_details"].get("count", 1))

            async def settled() -> bool:
                pd = [r for r in pagerduty.requests if outage(r.body)]
                return (bool(pd) and counted(pd[-1]) == total
                        and any(b"sku-" in r.body for r in slack.requests)
                        and any(b"sku-" in r.body for r in pagerduty.requests))

            assert await wait_for(settled, 110, procs), (len(slack.requests), len(pagerduty.requests))
            await asyncio.sleep(3)
        finally:
            stop(procs)

    for queue in LIST_QUEUES:
        assert int(await aredis.llen(keys.alerted(f"dead_letter:{queue}"))) == per_list + (queue == "inventory-03")
    outage_pd = [json.loads(r.body) for r in pagerduty.requests if outage(r.body)]
    outage_slack = [r for r in slack.requests if outage(r.body)]
    assert len({e["dedup_key"] for e in outage_pd}) == 1, "one PagerDuty incident for the outage"
    details = outage_pd[-1]["payload"]["custom_details"]
    assert details["count"] == total, "0 lost"
    assert set(details["queues"]) == set(LIST_QUEUES) | set(peer_queues)
    kinds = {"list", *(["rq"] if rq_queues else []), *(["sidekiq"] if sidekiq_queues else [])}
    assert set(details["kinds"]) == kinds
    assert outage_pd[-1]["payload"]["summary"].startswith(
        f"postgres-primary:5432 unreachable — {len(LIST_QUEUES) + len(peer_queues)} queues")
    assert len(outage_slack) <= 3, f"{len(outage_slack)} Slack messages for one outage"
    first_slack = outage_slack[0].at - started
    [odd] = [r for r in slack.requests if b"sku-" in r.body]
    assert b"postgres-primary" not in odd.body, "the unrelated failure has its own card"
    print(f"\noutage storm: {total} dead letters ({len(LIST_QUEUES)} list queues, {len(rq_queues)} RQ queues, "
          f"{len(sidekiq_queues)} Sidekiq queue), "
          f"2 replicas: PagerDuty incidents {len({e['dedup_key'] for e in outage_pd})} "
          f"({len(outage_pd)} events), Slack messages {len(outage_slack)}, "
          f"first Slack {first_slack:.1f} s after the replicas were up, "
          f"unrelated failure's Slack card after {odd.at - unrelated_at:.1f} s")
