"""Sink queues on real Redis: severity first then oldest first, leases, ack, stats."""

from __future__ import annotations

import time

import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from bridge.core.items import MAX_URGENCY, item_id, order_score
from bridge.core.models import Severity
from bridge.stores.sink_queue import SinkQueue

NOW_MS = int(time.time() * 1000)  # a real ms timestamp, ≈ 1.8e12
REAL_MS = st.integers(min_value=NOW_MS - 10 * 365 * 86_400_000, max_value=NOW_MS + 80 * 365 * 86_400_000)
URGENCY = st.integers(min_value=0, max_value=MAX_URGENCY)


@given(URGENCY, REAL_MS, URGENCY, REAL_MS)
def test_the_score_orders_severity_first_then_time_with_no_inversion(u1: int, ms1: int, u2: int, ms2: int) -> None:
    s1, s2 = order_score(u1, ms1), order_score(u2, ms2)
    assert float(s1) == s1 and float(s2) == s2, "exact in a double (Redis scores, Lua numbers)"
    if u1 != u2:
        assert (s1 < s2) == (u1 < u2), "a more urgent alert always comes first, however old the other"
    else:
        assert (s1 < s2) == (ms1 < ms2) and (s1 == s2) == (ms1 == ms2)


def test_the_classic_score_inverts_and_ours_does_not() -> None:
    """`priority * 1e10 + ms`: ms ≈ 1.7e12 spans 170 bands, a step of 1e10 ms is only 116 days."""

    def naive(priority: int, ms: int) -> float:  # lower first, 0 = critical
        return priority * 1e10 + ms

    critical_later = NOW_MS + 4 * 10**10
    assert naive(0, critical_later) > naive(3, NOW_MS), "the naive score puts the critical alert after info"
    assert order_score(0, critical_later) < order_score(3, NOW_MS)


def alert_json(n: int) -> str:
    return f'{{"n": {n}}}'


async def test_take_returns_critical_before_older_info_and_oldest_first_within_a_severity(
    aredis: aioredis.Redis,
) -> None:
    queue = SinkQueue(aredis, "slack")
    base = int(time.time() * 1000)
    put = [
        (Severity.INFO, base - 5000, "info-oldest"),
        (Severity.INFO, base - 1, "info-newer"),
        (Severity.WARNING, base, "warn"),
        (Severity.CRITICAL, base + 1, "crit-newest"),
        (Severity.CRITICAL, base, "crit-older"),
        (Severity.ERROR, base - 2, "error"),
    ]
    for severity, ms, name in put:
        assert await queue.put(item_id(severity, ms, f"q:{name}", "d" * 16), name)
    taken = [t.body for t in await queue.take(10)]
    assert taken == ["crit-older", "crit-newest", "error", "warn", "info-oldest", "info-newer"]


async def test_a_repeated_put_is_one_item_and_ack_removes_it(aredis: aioredis.Redis) -> None:
    queue = SinkQueue(aredis, "hook")
    ident = item_id(Severity.ERROR, NOW_MS, "q:j1", "d" * 16)
    assert await queue.put(ident, "a")
    assert not await queue.put(ident, "a"), "forwarding the same hand-off twice queues it once"
    [taken] = await queue.take(5)
    assert not await queue.put(ident, "a"), "nor while it is leased"
    assert (await queue.stats()).depth == 1
    await queue.ack(taken.id)
    assert (await queue.stats()).depth == 0
    assert await queue.take(5) == []


async def test_an_expired_lease_gives_the_item_back_in_its_place(aredis: aioredis.Redis) -> None:
    queue = SinkQueue(aredis, "hook", lease_s=1)
    crit = item_id(Severity.CRITICAL, NOW_MS, "q:crit", "d" * 16)
    info = item_id(Severity.INFO, NOW_MS - 9000, "q:info", "d" * 16)
    await queue.put(crit, "crit")
    await queue.put(info, "info")
    [first] = await queue.take(1, at_ms=NOW_MS)
    assert first.body == "crit"
    assert [t.body for t in await queue.take(5, at_ms=NOW_MS + 500)] == ["info"], "leased: not taken twice"
    again = await queue.take(5, at_ms=NOW_MS + 5000)  # both leases ran out (a killed replica)
    assert [t.body for t in again] == ["crit", "info"]


async def test_renew_keeps_a_lease_and_release_puts_items_back(aredis: aioredis.Redis) -> None:
    queue = SinkQueue(aredis, "hook", lease_s=1)
    ident = item_id(Severity.ERROR, NOW_MS, "q:j", "d" * 16)
    await queue.put(ident, "x")
    [taken] = await queue.take(1)
    await queue.renew([taken.id, "not-leased"])
    assert await aredis.zscore(queue.keys.leased, "not-leased") is None, "renew never creates a lease"
    assert await queue.release([taken.id]) == 1
    stats = await queue.stats()
    assert (stats.ready, stats.leased) == (1, 0)


async def test_stats_give_the_oldest_item_across_severities_and_leases(aredis: aioredis.Redis) -> None:
    queue = SinkQueue(aredis, "hook")
    assert (await queue.stats()).oldest_ms is None
    await queue.put(item_id(Severity.CRITICAL, NOW_MS, "q:a", "d" * 16), "a")
    await queue.put(item_id(Severity.INFO, NOW_MS - 60_000, "q:b", "d" * 16), "b")
    await queue.put(item_id(Severity.WARNING, NOW_MS - 30_000, "q:c", "d" * 16), "c")
    assert (await queue.stats()).oldest_ms == NOW_MS - 60_000
    await queue.take(3)
    stats = await queue.stats()
    assert (stats.ready, stats.leased, stats.oldest_ms) == (0, 3, NOW_MS - 60_000)
    assert stats.oldest_age_s(NOW_MS) == 60.0


def test_every_script_touches_one_cluster_slot() -> None:
    """The hand-off (source's slot) and the sink-queue scripts (sink's slot) each stay in one slot."""
    from redis.crc import key_slot

    from bridge.stores import keys

    for source in ("dead_letter:orders", "dead_letter:{carts}:eu"):
        handoff = [keys.processing(source, "pod-1"), keys.alerted(source), keys.outbox(source)]
        assert len({key_slot(k.encode()) for k in handoff}) == 1, handoff
    queue = keys.sink_queue("slack")
    assert len({key_slot(k.encode()) for k in (queue.ready, queue.leased, queue.items)}) == 1
    ledger = keys.delivered("slack", "orders:job-1", "0123456789abcdef")
    assert key_slot(ledger.encode()) == key_slot(queue.items.encode()), "take reserves and ack marks in one script"
    summary = [keys.summary("f" * 16), keys.summary_lead("f" * 16)]
    assert len({key_slot(k.encode()) for k in summary}) == 1, "the cache read takes the lead in one script"


async def test_a_take_with_reservations_reserves_skips_the_delivered_and_the_ack_marks(
    aredis: aioredis.Redis,
) -> None:
    from bridge.stores import keys
    from bridge.stores.ledger import Ledger

    ledger = Ledger(aredis, ttl_s=3600, reservation_ttl_s=30, owner="pod-1")
    queue = SinkQueue(aredis, "hook")
    ids = {job: item_id(Severity.ERROR, NOW_MS + n, f"orders:{job}", "d" * 16) for n, job in enumerate("abc")}
    for job, ident in ids.items():
        assert await queue.put(ident, job)
    ledger_key = {job: keys.delivered("hook", f"orders:{job}", "d" * 16) for job in ids}
    await aredis.set(ledger_key["b"], '{"at": 1}')  # b was delivered (its ack was lost)
    await aredis.set(ledger_key["c"], "sending:pod-2:proc:n1", px=30_000)  # c: another sender has it
    taken = {t.body: t for t in await queue.take(5, reserve=ledger.reserve_spec("hook"))}
    assert {job: t.state for job, t in taken.items()} == {"a": "reserved", "b": "duplicate", "c": "held"}
    assert (await aredis.get(ledger_key["a"])).decode() == taken["a"].token, "reserved before any send"
    assert taken["a"].token.startswith("sending:pod-1:")
    stats = await queue.stats()
    assert (stats.ready, stats.leased) == (0, 2), "the duplicate is dropped in the take, the others leased"
    await queue.ack(taken["a"].id, marks=[ledger_key["a"]], mark_value='{"at": 2}', ttl_s=3600)
    assert await aredis.get(ledger_key["a"]) == b'{"at": 2}' and 0 < await aredis.ttl(ledger_key["a"]) <= 3600
    assert (await queue.stats()).leased == 1
