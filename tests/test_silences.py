"""Silences: what they match, which sinks they hold back, and how fast every replica sees them."""

from __future__ import annotations

import redis.asyncio as aioredis

from bridge.sinks.sink_registry import SINKS as REGISTRY
from bridge.stores import keys
from bridge.stores.silences import KEEP_ENDED_S, Silence, SilenceFilter, SilenceStore
from tests.support.receiver import make_alert

NOW = 1_800_000_000.0
TYPES = {"slack": "slack", "pd": "pagerduty", "hook": "webhook", "stdout": "console"}
SINKS = {name: REGISTRY.named(kind).notifies_people for name, kind in TYPES.items()}


def silence(ident: str = "s1", **fields: object) -> Silence:
    base: dict[str, object] = {"id": ident, "starts_at": NOW - 10, "ends_at": NOW + 600}
    return Silence.model_validate(base | fields)


def test_every_given_matcher_must_match() -> None:
    alert = make_alert(queue="payments-eu", job_name="charge", fingerprint="fp1")
    assert silence(queue="payments*").matches(alert)
    assert silence(job_name="charge").matches(alert)
    assert silence(fingerprint="fp1").matches(alert)
    assert silence(queue="pay*", job_name="charge", fingerprint="fp1").matches(alert)
    assert not silence(queue="orders*").matches(alert)
    assert not silence(job_name="charg").matches(alert), "a job name matches exactly"
    assert not silence(queue="payments*", job_name="refund").matches(alert)
    assert not silence().matches(alert), "a silence without matchers matches nothing"


def test_webhooks_are_held_back_only_when_asked() -> None:
    plain, loud = silence(queue="*"), silence(queue="*", webhooks=True)
    assert [t for n, t in TYPES.items() if plain.silences(SINKS[n])] == ["slack", "pagerduty", "console"]
    assert [t for n, t in TYPES.items() if loud.silences(SINKS[n])] == ["slack", "pagerduty", "webhook", "console"]


async def test_another_replica_applies_a_new_silence_after_one_refresh(aredis: aioredis.Redis) -> None:
    tick = [0.0]
    store = SilenceStore(aredis, clock=lambda: NOW)
    other = SilenceFilter(store, SINKS, refresh_s=1.0, clock=lambda: NOW, monotonic=lambda: tick[0])
    alert = make_alert(queue="orders")
    assert await other.split(alert, list(SINKS)) == (list(SINKS), {})
    await store.put(silence("s9", queue="ord*"))
    tick[0] = 0.5
    assert (await other.split(alert, list(SINKS)))[1] == {}, "within the refresh interval the copy is used"
    tick[0] = 1.1
    assert await other.split(alert, list(SINKS)) == (["hook"], {"slack": "s9", "pd": "s9", "stdout": "s9"})


async def test_a_silence_stops_at_its_end_and_when_expired(aredis: aioredis.Redis) -> None:
    now = [NOW]
    store = SilenceStore(aredis, clock=lambda: now[0])
    await store.put(silence("a", queue="orders", ends_at=NOW + 60))
    await store.put(silence("b", job_name="ship_order", starts_at=NOW + 30, ends_at=NOW + 3600))
    filt = SilenceFilter(store, SINKS, refresh_s=0.0, clock=lambda: now[0])
    alert = make_alert(queue="orders")
    assert (await filt.split(alert, ["slack"]))[1] == {"slack": "a"}
    now[0] = NOW + 61
    assert (await filt.split(alert, ["slack"]))[1] == {"slack": "b"}
    ended = await store.expire("b", "alice")
    assert ended is not None and ended.expired_by == "alice" and ended.ends_at == NOW + 61
    assert await filt.split(alert, ["slack"]) == (["slack"], {})
    assert await store.expire("nope", "alice") is None


async def test_long_ended_silences_are_dropped_when_the_list_is_written(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    await store.put(silence("old", queue="x", starts_at=NOW - KEEP_ENDED_S - 100, ends_at=NOW - KEEP_ENDED_S - 1))
    await store.put(silence("recent", queue="x", ends_at=NOW - 10))
    assert sorted(k.decode() for k in await aredis.hkeys(keys.SILENCES)) == ["recent"]


async def test_an_unreadable_silence_is_skipped(aredis: aioredis.Redis) -> None:
    store = SilenceStore(aredis, clock=lambda: NOW)
    await aredis.hset(keys.SILENCES, "bad", "{not json")
    await store.put(silence("ok", queue="x"))
    assert [s.id for s in await store.all()] == ["ok"]
