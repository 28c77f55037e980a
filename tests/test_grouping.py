"""Grouping timers and the leased claim, on real Redis with a fake clock (docs/design.md, 5b)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.core.metrics import Metrics
from bridge.core.models import Alert, Notification, Severity
from bridge.settings import SlackSinkSettings, WebhookSinkSettings
from bridge.stores import keys
from bridge.stores.groups import Grouper, group_key
from tests.support.receiver import make_alert, sample

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def slack(**overrides: Any) -> SlackSinkSettings:
    data: dict[str, Any] = {"name": "team-slack", "type": "slack", "url": "http://127.0.0.1:9/hook"}
    data.update(overrides)
    return SlackSinkSettings(**data)


def job(n: int, *, fp: str = "cause-a", queue: str = "orders", severity: Severity = Severity.ERROR) -> Alert:
    return make_alert(queue=queue, job_id=f"job-{n}", fingerprint=fp, severity=severity)


async def deliver_all(grouper: Grouper, limit: int = 10) -> list[Notification]:
    claimed = await grouper.claim_due(limit)
    for n in claimed:
        assert await grouper.record(n, delivered=True)
    return claimed


async def test_group_wait_then_one_digest_for_the_whole_burst(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    for i in range(25):
        await grouper.add(job(i))
    assert await grouper.claim_due() == []  # group_wait not over
    clock.advance(9.9)
    assert await grouper.claim_due() == []
    clock.advance(0.1)
    [n] = await deliver_all(grouper)
    assert (n.kind, n.sequence, n.count, n.new_count, n.previous_at) == ("digest", 1, 25, 25, None)
    assert n.sample_job_ids == [f"job-{i}" for i in range(10)]
    assert n.first.dead_letter.job_id == "job-0"
    assert n.queues == ["orders"] and n.first_seen == T0 and n.last_seen == T0
    assert n.ledger_key == f"group:fp:cause-a@{int(T0 * 1000)}:1"


async def test_a_group_of_one_is_a_single_keyed_by_the_job(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(1))
    clock.advance(10)
    [n] = await deliver_all(grouper)
    assert (n.kind, n.count, n.sequence) == ("single", 1, 1)
    assert n.ledger_key == "orders:job-1"


async def test_add_is_idempotent_per_job(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    assert await grouper.admit(job(1))
    assert not await grouper.admit(job(1))  # a replayed sink-queue item
    clock.advance(10)
    [n] = await grouper.claim_due()
    assert n.count == 1 and n.kind == "single"


async def test_growth_notifies_after_group_interval_and_says_what_changed(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(0))
    await grouper.add(job(1))
    clock.advance(10)
    await deliver_all(grouper)
    sent_at = clock.now
    clock.advance(5)
    for i in range(2, 7):
        await grouper.add(job(i))
    clock.advance(54.9)
    assert await grouper.claim_due() == []  # not before group_interval after #1
    clock.advance(0.1)
    [n] = await deliver_all(grouper)
    assert (n.kind, n.sequence, n.count, n.new_count) == ("digest", 2, 7, 5)
    assert n.previous_at == sent_at
    assert n.sample_job_ids == [f"job-{i}" for i in range(2, 7)]  # the new ones
    assert n.last_seen == sent_at + 5


async def test_no_notification_when_the_group_did_not_grow(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(0))
    await grouper.add(job(1))
    clock.advance(10)
    await deliver_all(grouper)
    for _ in range(240):  # 4 h minus a minute, checked every minute
        clock.advance(60)
        if clock.now < T0 + 10 + 14400:
            assert await grouper.claim_due() == []


async def test_repeat_after_repeat_interval_then_the_group_closes(aredis: aioredis.Redis) -> None:
    clock = Clock()
    metrics = Metrics()
    grouper = Grouper(aredis, slack(), clock, metrics=metrics)
    await grouper.add(job(0))
    assert sample(metrics, "dlq_bridge_open_groups", sink="team-slack") == 1
    await grouper.add(job(1))
    clock.advance(10)
    await deliver_all(grouper)
    assert sample(metrics, "dlq_bridge_open_groups", sink="team-slack") == 1
    clock.advance(14399.9)
    assert await grouper.claim_due() == []
    clock.advance(0.1)
    [n] = await deliver_all(grouper)
    assert (n.kind, n.sequence, n.count, n.new_count) == ("repeat", 2, 2, 0)
    assert n.sample_job_ids == ["job-0", "job-1"]
    assert await grouper.open_groups() == 0
    assert sample(metrics, "dlq_bridge_open_groups", sink="team-slack") == 0
    assert sample(metrics, "dlq_bridge_notifications_total", sink="team-slack", kind="repeat") == 1
    assert sample(metrics, "dlq_bridge_notifications_total", sink="team-slack", kind="digest") == 1
    clock.advance(10**6)
    assert await grouper.claim_due() == []  # closed: no more repeats
    # the same cause again opens a new group: a fresh first notification, a new ledger key
    await grouper.add(job(99))
    clock.advance(10)
    [again] = await grouper.claim_due()
    assert (again.kind, again.sequence, again.count) == ("single", 1, 1)
    assert again.first.dead_letter.job_id == "job-99"
    assert await grouper.members(again.group_key) == ["orders:job-99"]
    assert await grouper.members(again.group_key, previous=True) == ["orders:job-0", "orders:job-1"]


async def test_a_quiet_group_that_grows_later_is_due_at_once(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(0))
    clock.advance(10)
    await deliver_all(grouper)
    clock.advance(3600)
    await grouper.add(job(1))
    [n] = await deliver_all(grouper)
    assert (n.kind, n.sequence, n.count, n.new_count) == ("digest", 2, 2, 1)


async def test_jobs_added_while_a_notification_is_sent_come_next(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(0))
    clock.advance(10)
    [n] = await grouper.claim_due()
    await grouper.add(job(1))  # arrives while #1 is in flight
    assert await grouper.record(n, delivered=True)
    clock.advance(59)
    assert await grouper.claim_due() == []
    clock.advance(1)
    [second] = await grouper.claim_due()
    assert (second.kind, second.new_count, second.count) == ("digest", 1, 2)


async def test_undeliverable_is_not_marked_sent_and_is_tried_again(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(0))
    await grouper.add(job(1))
    clock.advance(10)
    [n] = await grouper.claim_due()
    assert await grouper.record(n, delivered=False)
    await grouper.add(job(2))
    clock.advance(60)
    [again] = await grouper.claim_due()
    assert (again.kind, again.sequence, again.count, again.new_count) == ("digest", 1, 3, 3)
    assert again.ledger_key == n.ledger_key


async def test_two_replicas_claiming_one_due_group_exactly_one_wins(aredis: aioredis.Redis) -> None:
    clock = Clock()
    a, b = Grouper(aredis, slack(), clock), Grouper(aredis, slack(), clock)
    for i in range(3):
        await a.add(job(i))
        await b.add(job(i + 100, fp="cause-b"))
    clock.advance(10)
    for _ in range(20):  # interleave many times: never both
        got_a, got_b = await a.claim_due(), await b.claim_due()
        assert len(got_a) + len(got_b) <= 2
        assert not {n.group_key for n in got_a} & {n.group_key for n in got_b}
        for n in got_a:
            assert await a.record(n, delivered=False)
        for n in got_b:
            assert await b.record(n, delivered=False)
        clock.advance(60)


async def test_two_replicas_racing_concurrently(aredis: aioredis.Redis, redis_url: str) -> None:
    import asyncio

    clock = Clock()
    other = aioredis.Redis.from_url(redis_url)
    try:
        a, b = Grouper(aredis, slack(), clock), Grouper(other, slack(), clock)
        for g in range(30):
            await a.add(job(g, fp=f"cause-{g}"))
        clock.advance(10)
        got_a, got_b = await asyncio.gather(a.claim_due(30), b.claim_due(30))
    finally:
        await other.aclose()
    keys_a, keys_b = {n.group_key for n in got_a}, {n.group_key for n in got_b}
    assert not keys_a & keys_b
    assert len(keys_a | keys_b) == 30


async def test_a_claimant_killed_before_notified_leaves_nothing_stuck(aredis: aioredis.Redis) -> None:
    clock = Clock()
    dead = Grouper(aredis, slack(), clock, lease_s=120)
    alive = Grouper(aredis, slack(), clock, lease_s=120)
    await dead.add(job(0))
    await dead.add(job(1))
    clock.advance(10)
    [lost] = await dead.claim_due()  # ... and the process is killed -9 here
    await alive.add(job(2))
    clock.advance(119)
    assert await alive.claim_due() == []  # the lease still holds
    clock.advance(1)
    [n] = await alive.claim_due()
    assert (n.kind, n.sequence, n.ledger_key) == ("digest", 1, lost.ledger_key)
    assert n.count == 3
    assert await alive.record(n, delivered=True)
    assert not await dead.record(lost, delivered=True)  # a stale claimant changes nothing
    clock.advance(60)
    assert await alive.claim_due() == []


async def test_severity_is_the_most_urgent_member_and_queues_are_counted(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(group_by="fingerprint"), clock)
    await grouper.add(job(0, queue="orders", severity=Severity.WARNING))
    await grouper.add(job(1, queue="billing", severity=Severity.CRITICAL))
    await grouper.add(job(2, queue="billing", severity=Severity.INFO))
    clock.advance(10)
    [n] = await grouper.claim_due()
    assert n.severity is Severity.CRITICAL
    assert n.queues == ["billing", "orders"]
    assert n.queue_counts == {"billing": 2, "orders": 1}


async def test_group_by_queue_and_none(aredis: aioredis.Redis) -> None:
    a, b = job(1, fp="x", queue="orders"), job(2, fp="y", queue="orders")
    assert group_key(a, "queue") == group_key(b, "queue") == "queue:orders"
    assert group_key(a, "fingerprint") != group_key(b, "fingerprint")
    assert group_key(a, "none") == "job:orders:job-1"
    assert group_key(job(1, fp=""), "fingerprint") == "job:orders:job-1"


async def test_webhook_groups_carry_every_new_job_once_in_pages(aredis: aioredis.Redis) -> None:
    clock = Clock()
    hook = WebhookSinkSettings(
        name="hook", type="webhook", url="http://127.0.0.1:9/h", secret="s3", group_by="queue"
    )
    grouper = Grouper(aredis, hook, clock)
    for i in range(1200):
        await grouper.add(job(i))
    clock.advance(10)
    pages = [await deliver_all(grouper) for _ in range(4)]  # no clock advance: the rest is due at once
    assert [len(p) for p in pages] == [1, 1, 1, 0]
    sent = [p[0] for p in pages[:3]]
    assert [(n.sequence, n.new_count, n.pending, n.count) for n in sent] == [
        (1, 500, 700, 1200), (2, 500, 200, 1200), (3, 200, 0, 1200)
    ]
    listed = [j.job_id for n in sent for j in n.jobs]
    assert listed == [f"job-{i}" for i in range(1200)]
    for i in range(1200, 1250):
        await grouper.add(job(i))
    clock.advance(59)
    assert await grouper.claim_due() == []
    clock.advance(1)
    [m] = await deliver_all(grouper)
    assert [j.job_id for j in m.jobs] == [f"job-{i}" for i in range(1200, 1250)]
    assert (m.kind, m.sequence, m.new_count, m.pending) == ("digest", 4, 50, 0)


async def test_group_keys_share_the_sink_slot(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(), clock)
    await grouper.add(job(1, fp="{evil}tag"))
    found = [k.decode() for k in await aredis.keys("dlq_bridge:group*") if isinstance(k, bytes)]
    assert found and all(k.split("{", 1)[1].startswith("team-slack}") for k in found)
    assert keys.groups_due("team-slack") in found


async def test_a_renewed_lease_keeps_a_slow_delivery_its_own(aredis: aioredis.Redis) -> None:
    clock = Clock()
    a, b = Grouper(aredis, slack(), clock, lease_s=30), Grouper(aredis, slack(), clock, lease_s=30)
    await a.add(job(0))
    clock.advance(10)
    [n] = await a.claim_due()
    for _ in range(5):  # a delivery retrying for 100 s, renewing every 20 s
        clock.advance(20)
        assert await a.renew(n)
        assert await b.claim_due() == []
    clock.advance(30)
    [taken] = await b.claim_due()  # renewals stopped (killed): the lease ends, b takes over
    assert not await a.renew(n) and not await a.record(n, delivered=True)
    assert await b.record(taken, delivered=True)


CLAIMANT = """
import asyncio, os, signal, sys
import redis.asyncio as aioredis
from bridge.stores.groups import Grouper
from bridge.settings import SlackSinkSettings

async def main() -> None:
    client = aioredis.Redis.from_url(sys.argv[1])
    settings = SlackSinkSettings(name="team-slack", type="slack", url="http://127.0.0.1:9/x")
    claimed = await Grouper(client, settings, lease_s=float(sys.argv[2])).claim_due()
    print(len(claimed), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # holding the group, never calls notified

asyncio.run(main())
"""


async def test_a_replica_killed_9_holding_a_group_leaves_it_to_another(
    aredis: aioredis.Redis, redis_url: str
) -> None:
    import asyncio
    import sys
    import time

    grouper = Grouper(aredis, slack(group_wait_s=0), lease_s=5.0)
    await grouper.add(job(0))
    await grouper.add(job(1))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLAIMANT, redis_url, "5.0", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == -9 and out.strip() == b"1"
    assert await grouper.claim_due() == []  # the dead replica's lease still holds
    deadline = time.monotonic() + 30
    claimed: list[Notification] = []
    while not claimed and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        claimed = await grouper.claim_due()
    [n] = claimed
    assert (n.kind, n.sequence, n.count) == ("digest", 1, 2)
    assert await grouper.record(n, delivered=True)


async def test_a_queue_named_like_a_key_suffix_is_its_own_group(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(group_by="queue"), clock)
    for queue in ("orders", "orders:jobs", "orders:job", "orders:queues", "orders:state"):
        await grouper.add(job(1, queue=queue))
        await grouper.add(job(2, queue=queue))
    clock.advance(10)
    claimed = await grouper.claim_due()
    assert sorted(n.queues[0] for n in claimed) == [
        "orders", "orders:job", "orders:jobs", "orders:queues", "orders:state"
    ]
    assert all(n.count == 2 for n in claimed)


PG_DOWN = ("PG::ConnectionBad: could not connect to server: Connection refused\n"
           '\tIs the server running on host "postgres-primary" (10.0.0.7) and accepting\n'
           "\tTCP/IP connections on port 5432?")


def outage_job(n: int, queue: str, *, name: str = "sync_inventory", kind: str | None = None,
               severity: Severity = Severity.ERROR, error: str = PG_DOWN) -> Alert:
    return make_alert(queue=queue, job_id=f"{queue}-{n}", fingerprint=f"fp-{queue}", severity=severity,
                      last_error=error.replace("10.0.0.7", f"10.0.0.{n % 7}"), job_name=name, source_kind=kind)


async def test_one_cause_over_many_queues_and_kinds_is_one_group_that_says_so(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(group_by="cause"), clock)
    queues = [f"q{i:02d}" for i in range(12)]
    for i, queue in enumerate(queues):
        kind = ("sidekiq", "rq", None)[i % 3]
        for n in range(10):
            clock.advance(0.1)
            await grouper.add(outage_job(n, queue, kind=kind, name="reindex" if n == 9 else "sync_inventory"))
    clock.advance(10)
    [n] = await deliver_all(grouper)
    assert n.count == 120 and len(n.queues) == 12 and n.outage
    assert n.group_key.startswith("cause:error:")
    assert n.job_counts == {"sync_inventory": 108, "reindex": 12}
    assert n.kind_counts == {"sidekiq": 40, "rq": 40, "list": 40}
    assert n.queue_first["q00"] == pytest.approx(T0 + 0.1) and n.queue_last["q11"] == pytest.approx(T0 + 12.0)
    assert await grouper.open_groups() == 1


async def test_cause_groups_never_cross_severity_or_another_dependency(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(group_by="cause"), clock)
    await grouper.add(outage_job(1, "orders"))
    await grouper.add(outage_job(2, "billing", severity=Severity.CRITICAL))
    await grouper.add(outage_job(3, "search", error=PG_DOWN.replace("postgres-primary", "postgres-replica")))
    await grouper.add(outage_job(4, "emails"))
    clock.advance(10)
    notes = await deliver_all(grouper)
    assert sorted((n.count, tuple(n.queues)) for n in notes) == [
        (1, ("billing",)), (1, ("search",)), (2, ("emails", "orders"))]


async def test_a_cause_group_resolves_once_every_job_has_left(aredis: aioredis.Redis) -> None:
    clock = Clock()
    grouper = Grouper(aredis, slack(group_by="cause"), clock)
    alerts = [outage_job(n, q) for n, q in enumerate(["orders", "billing", "search"])]
    for alert in alerts:
        await grouper.add(alert)
    group = grouper.key_for(alerts[0])
    assert {grouper.key_for(a) for a in alerts} == {group}
    assert await grouper.left(group, alerts[1].idempotency_key) is None
    assert await grouper.left(group, "not-a-member") is None
    assert await grouper.left(group, alerts[2].idempotency_key) is None
    first = await grouper.left(group, alerts[0].idempotency_key)
    assert first is not None and first.idempotency_key == alerts[0].idempotency_key
