"""An open group holds a fixed size however long its failure recurs (docs/design.md, 5b, "Bounded groups").

Each test fills a group far past a small `group_members_max` on real Redis with a fake clock, and
checks what a user notices: the totals the cards say, the jobs they list, the resolve that closes
the incident, and the size of the group's keys.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from bridge.core.models import Alert
from bridge.settings import PagerDutySinkSettings, SlackSinkSettings, WebhookSinkSettings
from bridge.stores import keys
from bridge.stores.groups import Grouper
from tests.support.receiver import make_alert
from tests.test_grouping import Clock, deliver_all

CAP = 20
TOO_MANY = int(CAP * 1.5)  # a group is trimmed back to CAP once it names more than this


def recurring(n: int, queue: str = "orders") -> Alert:
    return make_alert(queue=queue, job_id=f"job-{n}", fingerprint="fp-recurring")


def slack(**overrides: Any) -> SlackSinkSettings:
    data: dict[str, Any] = {"name": "slack-ops", "type": "slack", "url": "http://127.0.0.1:9/hook",
                            "group_members_max": CAP}
    return SlackSinkSettings(**{**data, **overrides})


def pagerduty() -> PagerDutySinkSettings:
    return PagerDutySinkSettings(name="pagerduty", type="pagerduty", routing_key="r" * 32,
                                 group_by="fingerprint", group_members_max=CAP)


async def group_size(client: aioredis.Redis, sink: str, group: str) -> tuple[int, int, int]:
    """(jobs named, job details kept, members gone) of one open group."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.zcard(keys.group_jobs(sink, group))
        pipe.hlen(keys.group_job_details(sink, group))
        pipe.scard(keys.group_gone(sink, group))
        named, details, gone = await pipe.execute()
    return int(named), int(details), int(gone)


async def test_a_failure_that_recurs_for_hours_keeps_its_group_at_a_fixed_size(aredis: aioredis.Redis) -> None:
    clock, sink = Clock(), slack()
    grouper = Grouper(aredis, sink, clock)
    sent = []
    for n in range(600):
        await grouper.add(recurring(n))
        clock.advance(1)
        if n % 60 == 59:  # one digest a minute, as group_interval_s allows
            sent += await deliver_all(grouper)
        named, details, _gone = await group_size(aredis, sink.name, grouper.key_for(recurring(0)))
        assert named <= TOO_MANY and details <= TOO_MANY
    assert [n.count for n in sent] == [60 * i for i in range(1, 11)]  # "M in all" counts every job
    assert [n.new_count for n in sent[1:]] == [60] * 9
    assert sent[-1].sample_job_ids == [f"job-{n}" for n in range(540, 550)]  # the new jobs, in order
    assert sent[-1].first.dead_letter.job_id == "job-0"
    [view] = await grouper.views()
    assert (view.count, view.notified) == (600, 600)


async def test_a_sink_that_never_delivers_holds_a_fixed_size_and_still_counts_every_job(
    aredis: aioredis.Redis,
) -> None:
    clock, sink = Clock(), slack()
    grouper = Grouper(aredis, sink, clock)
    for n in range(400):
        await grouper.add(recurring(n))
        clock.advance(1)
        if n % 60 == 59:
            for note in await grouper.claim_due():
                assert await grouper.record(note, delivered=False)  # undeliverable: nothing marked sent
    named, details, _gone = await group_size(aredis, sink.name, grouper.key_for(recurring(0)))
    assert CAP <= named <= TOO_MANY and details == named
    clock.advance(60)
    [note] = await deliver_all(grouper)
    assert (note.kind, note.count, note.sequence) == ("digest", 400, 1)
    assert len(note.sample_job_ids) == 10


async def test_a_webhook_still_gets_every_job_once_when_its_groups_are_trimmed(aredis: aioredis.Redis) -> None:
    clock = Clock()
    hook = WebhookSinkSettings(name="hook", type="webhook", url="http://127.0.0.1:9/h", secret="s3",
                               group_by="queue", group_members_max=CAP)
    grouper = Grouper(aredis, hook, clock)
    listed: list[str] = []
    for n in range(300):
        await grouper.add(recurring(n))
        if n % 15 == 14:
            clock.advance(60)
            listed += [j.job_id for note in await deliver_all(grouper) for j in note.jobs]
    assert listed == [f"job-{n}" for n in range(300)]
    named, _details, _gone = await group_size(aredis, hook.name, "queue:orders")
    assert named <= TOO_MANY + 15, "the cap, and the jobs added since the last page"


async def test_a_long_open_resolving_group_resolves_exactly_when_its_last_job_leaves(aredis: aioredis.Redis) -> None:
    """Jobs are redriven a little after they die while the failure recurs; at the end every job leaves."""
    clock, sink = Clock(), pagerduty()
    grouper = Grouper(aredis, sink, clock)
    group = grouper.key_for(recurring(0))
    for n in range(300):
        await grouper.add(recurring(n))
        clock.advance(1)
        if n % 30 == 29:
            await deliver_all(grouper)
        if n >= 5:  # job n-5 is retried by hand and leaves
            assert await grouper.left(group, recurring(n - 5).idempotency_key) is None
        named, details, gone = await group_size(aredis, sink.name, group)
        assert named <= TOO_MANY and details <= TOO_MANY and gone <= named
    for n in range(295, 299):
        assert await grouper.left(group, recurring(n).idempotency_key) is None
    assert await grouper.left(group, recurring(3).idempotency_key) is None  # left long ago: counted once
    first = await grouper.left(group, recurring(299).idempotency_key)
    assert first is not None and first.dead_letter.job_id == "job-0"


async def test_a_resolving_group_that_must_forget_jobs_still_waiting_no_longer_resolves_on_leaving(
    aredis: aioredis.Redis,
) -> None:
    """Past its cap with every job still in its store, the group cannot tell when all have left:
    its incident stays open (closed by the repeat or by hand) rather than resolving early."""
    clock, sink = Clock(), pagerduty()
    grouper = Grouper(aredis, sink, clock)
    group = grouper.key_for(recurring(0))
    for n in range(TOO_MANY + 1):
        await grouper.add(recurring(n))
    named, _details, _gone = await group_size(aredis, sink.name, group)
    assert named == CAP
    for n in range(TOO_MANY + 1):
        assert await grouper.left(group, recurring(n).idempotency_key) is None


async def test_a_sink_down_for_good_closes_the_groups_of_causes_that_stopped(aredis: aioredis.Redis) -> None:
    """Without this, a sink that never answers keeps every group it ever opened: one per cause, for ever."""
    clock, sink = Clock(), slack(repeat_interval_s=600)
    grouper = Grouper(aredis, sink, clock)
    for cause in range(5):  # five failures, each recurring for a minute, then never again
        for n in range(6):
            await grouper.add(make_alert(queue="orders", job_id=f"c{cause}-{n}", fingerprint=f"fp-{cause}"))
            clock.advance(10)
    for minute in range(15):  # one failure goes on; every notification fails
        await grouper.add(make_alert(queue="orders", job_id=f"still-{minute}", fingerprint="fp-still"))
        for note in await grouper.claim_due(20):
            await grouper.record(note, delivered=False)
        clock.advance(60)
    assert await grouper.open_groups() == 1, "only the failure still recurring keeps its group open"
    closed = keys.group(sink.name, grouper.key_for(make_alert(queue="orders", fingerprint="fp-0")))
    assert 0 < await aredis.ttl(closed) <= 7 * 24 * 3600


async def test_a_webhook_gets_every_job_of_a_burst_larger_than_the_cap(aredis: aioredis.Redis) -> None:
    clock = Clock()
    hook = WebhookSinkSettings(name="hook", type="webhook", url="http://127.0.0.1:9/h", secret="s3",
                               group_by="queue", group_members_max=CAP)
    grouper = Grouper(aredis, hook, clock)
    for n in range(700):  # all within group_wait
        await grouper.add(recurring(n))
    clock.advance(10)
    listed = [j.job_id for _ in range(3) for note in await deliver_all(grouper) for j in note.jobs]
    assert listed == [f"job-{n}" for n in range(700)]
    for n in range(700, 760):
        await grouper.add(recurring(n))
    named, _details, _gone = await group_size(aredis, hook.name, "queue:orders")
    assert named <= TOO_MANY + 60, "once sent, the burst is trimmed away"
