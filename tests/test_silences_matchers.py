"""Silences with matchers in Redis: what the hand-off holds back, edits, comments, and 0.2.0's fields."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from bridge.core.models import Severity
from bridge.core.silence_match import parse_matcher
from bridge.sinks.sink_registry import SINKS as REGISTRY
from bridge.stores import keys
from bridge.stores.silences import COMMENTS_MAX, Silence, SilenceEdit, SilenceFilter, SilenceStore, new_silence
from tests.support.receiver import make_alert

NOW = 1_800_000_000.0
TYPES = {"slack": "slack", "pd": "pagerduty", "hook": "webhook"}
SINKS = {name: REGISTRY.named(kind).notifies_people for name, kind in TYPES.items()}


def made(*texts: str, **kw: object) -> Silence:
    fields: dict[str, object] = {"author": "alice", "comment": "maintenance"} | kw
    return new_silence([parse_matcher(t) for t in texts], NOW - 1, NOW + 3600, **fields)  # type: ignore[arg-type]


async def stored(aredis: aioredis.Redis, silence_id: str) -> dict[str, object]:
    raw = await aredis.hget(keys.SILENCES, silence_id)
    assert raw is not None
    value: dict[str, object] = json.loads(raw)
    return value


async def test_one_queue_s_warnings_are_held_back_and_nothing_else(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    await store.put(made("queue=emails", 'severity=~"warn.*"'))
    filt = SilenceFilter(store, SINKS, refresh_s=0.0, clock=lambda: NOW)
    warn = make_alert(queue="emails", severity=Severity.WARNING)
    crit = make_alert(queue="emails", severity=Severity.CRITICAL)
    other = make_alert(queue="reports", severity=Severity.WARNING)
    assert (await filt.split(warn, list(SINKS)))[0] == ["hook"]
    assert (await filt.split(crit, list(SINKS)))[1] == {}
    assert (await filt.split(other, list(SINKS)))[1] == {}


async def test_a_sink_matcher_holds_back_that_sink_only(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    silence = made("sink=pd", "queue!=payments")
    await store.put(silence)
    filt = SilenceFilter(store, SINKS, refresh_s=0.0, clock=lambda: NOW)
    assert await filt.split(make_alert(queue="emails"), list(SINKS)) == (["slack", "hook"], {"pd": silence.id})
    assert (await filt.split(make_alert(queue="payments"), list(SINKS)))[1] == {}


async def test_0_2_0_fields_are_written_only_when_they_say_exactly_the_same(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    exact = made("cause=fp1", "queue=mail*box", "job_name=send")
    wider = made("queue=emails", 'severity=~"warn.*"')
    await store.put(exact)
    await store.put(wider)
    assert {k: v for k, v in (await stored(aredis, exact.id)).items() if k in ("queue", "job_name", "fingerprint")} == {
        "queue": "mail[*]box",
        "job_name": "send",
        "fingerprint": "fp1",
    }
    assert {k: v for k, v in (await stored(aredis, wider.id)).items() if k in ("queue", "job_name", "fingerprint")} == {
        "queue": None,
        "job_name": None,
        "fingerprint": None,
    }, "0.2.0 would silence every emails alert"


async def test_a_0_2_0_silence_is_read_and_matched_as_0_2_0_matches_it(aredis: aioredis.Redis) -> None:
    old = {
        "id": "old1",
        "queue": "pay*",
        "job_name": "charge",
        "fingerprint": None,
        "starts_at": NOW - 5,
        "ends_at": NOW + 60,
        "reason": "deploy",
        "author": "bob",
        "webhooks": False,
        "expired_by": None,
    }
    await aredis.hset(keys.SILENCES, "old1", json.dumps(old))
    store = SilenceStore(aredis, clock=lambda: NOW)
    [found] = await store.all()
    assert [str(m) for m in found.shown_matchers()] == ['queue=~"(?s:pay.*)"', 'job_name="charge"']
    filt = SilenceFilter(store, SINKS, refresh_s=0.0, clock=lambda: NOW)
    assert (await filt.split(make_alert(queue="payments", job_name="charge"), ["slack"]))[1] == {"slack": "old1"}
    assert (await filt.split(make_alert(queue="payments", job_name="refund"), ["slack"]))[1] == {}
    await store.expire("old1", "carol")
    assert set(await stored(aredis, "old1")) >= set(old), "0.2.0's fields are all still there"


async def test_new_matchers_on_a_started_silence_make_a_new_id_and_extending_keeps_it(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    first = made("queue=emails")
    await store.put(first)
    extended = await store.update(first.id, SilenceEdit(ends_at=NOW + 7200, comment="longer"), "bob")
    assert extended is not None
    kept, replaced = extended
    assert (kept.id, kept.ends_at, kept.reason, kept.updated_by, replaced) == (
        first.id,
        NOW + 7200,
        "longer",
        "bob",
        None,
    )
    edited = await store.update(first.id, SilenceEdit(matchers=[parse_matcher("queue=reports")]), "bob")
    assert edited is not None
    fresh, old = edited
    assert old is not None and fresh.id != first.id
    assert (old.ends_at, old.expired_by, old.replaced_by) == (NOW, "bob", fresh.id)
    assert (fresh.replaces, fresh.ends_at, fresh.queue) == (first.id, NOW + 7200, "reports")
    assert {s.id for s in await store.all() if s.active(NOW)} == {fresh.id}
    assert await store.update("nope", SilenceEdit(ends_at=NOW + 5), "bob") is None


async def test_a_pending_silence_is_edited_in_place(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    later = new_silence([parse_matcher("queue=emails")], NOW + 600, NOW + 1200, author="alice")
    await store.put(later)
    done = await store.update(later.id, SilenceEdit(matchers=[parse_matcher('queue=~"e.*"')]), "alice")
    assert done is not None and done[0].id == later.id and done[1] is None
    assert done[0].queue is None, "no longer exact for 0.2.0: its field is cleared"


async def test_comments_keep_their_author_and_are_bounded(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    silence = made("queue=emails")
    await store.put(silence)
    for i in range(COMMENTS_MAX + 2):
        await store.comment(silence.id, f"user{i}", f"note {i}")
    found = await store.get(silence.id)
    assert found is not None and len(found.comments) == COMMENTS_MAX
    assert (found.comments[-1].author, found.comments[-1].text) == (
        f"user{COMMENTS_MAX + 1}",
        f"note {COMMENTS_MAX + 1}",
    )
    assert await store.comment("nope", "x", "y") is None
