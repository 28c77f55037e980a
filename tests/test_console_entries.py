"""Where each alert went, as the console reads it from the ledger, queues, groups and undeliverable list."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from bridge.console.entries import DeliveryReader, Record, runbook_link
from bridge.settings import SinkSettings, SlackSinkSettings, WebhookSinkSettings
from bridge.stores import keys
from bridge.stores.groups import group_key
from bridge.stores.handoff import entry_record
from tests.support.receiver import make_alert

MS = 1_800_000_000_000


def record(job: str, sinks: list[str], silenced: dict[str, str] | None = None) -> Record:
    alert = make_alert(job_id=job, raw_digest=f"{job:0>16}", fingerprint="cause")
    parsed = Record.parse(entry_record(alert.model_dump_json(), MS, f"2:{MS}:{alert.idempotency_key}:x",
                                       sinks, silenced or {}, False))
    assert parsed is not None
    return parsed


SINKS: list[SinkSettings] = [
    WebhookSinkSettings(name="hook", type="webhook", url="http://127.0.0.1:9/x", secret="s"),
    SlackSinkSettings(name="slack", type="slack", url="http://127.0.0.1:9/y", group_by="fingerprint"),
]


@pytest.mark.parametrize(("mark", "state"), [
    (json.dumps({"at": MS / 1000 + 5}), "delivered"),
    (json.dumps({"at": MS / 1000 - 3600}), "duplicate"),
    ("sending:bridge-1:p:n", "pending"),
])
async def test_the_ledger_tells_delivered_duplicate_and_sending(aredis: aioredis.Redis, mark: str, state: str) -> None:
    rec = record("j1", ["hook"])
    alert = rec.alert
    await aredis.set(keys.delivered("hook", alert.idempotency_key, alert.dead_letter.raw_digest), mark)
    [[found]] = await DeliveryReader(aredis, SINKS).states([rec])
    assert (found.sink, found.state) == ("hook", state)


async def test_queued_undeliverable_silenced_and_unknown(aredis: aioredis.Redis) -> None:
    queued, failed, quiet, lost = (record("q", ["hook"]), record("f", ["hook"]),
                                   record("s", [], {"slack": "sil-1"}), record("l", ["hook"]))
    await aredis.hset(keys.sink_queue("hook").items, queued.item, "{}")
    await aredis.lpush(keys.UNDELIVERABLE, json.dumps({"sink": "hook", "idempotency_key": failed.alert.idempotency_key,
                                                       "raw_digest": failed.alert.dead_letter.raw_digest,
                                                       "error": "HTTP 410", "at": 5.0}))
    states = await DeliveryReader(aredis, SINKS).states([queued, failed, quiet, lost])
    assert [[(d.sink, d.state) for d in found] for found in states] == [
        [("hook", "pending")], [("hook", "undeliverable")], [("slack", "silenced")], [("hook", "unknown")]]
    assert states[1][0].detail == "HTTP 410" and states[1][0].at == 5.0
    assert states[2][0].silence_id == "sil-1"


async def test_a_group_member_is_grouped_until_a_notification_covers_it(aredis: aioredis.Redis) -> None:
    first, second = record("g1", ["slack"]), record("g2", ["slack"])
    group = group_key(first.alert, "fingerprint")
    members = {first.alert.idempotency_key: 1, second.alert.idempotency_key: 2}
    await aredis.zadd(keys.group_jobs("slack", group), members)
    await aredis.hset(keys.group("slack", group), mapping={"notified": 1, "previous_at": 123.0})
    states = await DeliveryReader(aredis, SINKS).states([first, second])
    assert [(s[0].state, s[0].at, s[0].group_key) for s in states] == [
        ("delivered", 123.0, group), ("grouped", None, group)]


def test_only_the_bridges_own_runbook_links_are_clickable() -> None:
    ours = make_alert(runbook_url="https://runbooks.example/db-timeout.md")
    theirs = make_alert(runbook_url="javascript:alert(1)")
    assert runbook_link(ours, "https://runbooks.example") is not None
    assert runbook_link(ours, "https://runbooks.example").clickable is True  # type: ignore[union-attr]
    assert runbook_link(ours, None).clickable is False  # type: ignore[union-attr]
    assert runbook_link(theirs, "javascript:").clickable is False  # type: ignore[union-attr]
    assert runbook_link(make_alert(), "https://runbooks.example") is None


async def test_the_hand_off_writes_a_record_and_the_minutes_counts(aredis: aioredis.Redis) -> None:
    from bridge.core.claimed import Claimed, entry_digest
    from bridge.stores.handoff import HandOff
    from bridge.stores.sink_queue import SinkQueue

    handoff = HandOff(aredis, "test-1", 2, {"s1": SinkQueue(aredis, "s1")})
    raws = [f"a{i}".encode() for i in range(3)]
    alerts = [make_alert(job_id=f"k{i}", raw_digest=entry_digest(raw)) for i, raw in enumerate(raws)]
    inflight = keys.inflight("src", "test-1")  # a kind record in flight (`bridge.sources.kind_port`)

    async def hand_off(i: int, sinks: list[str]) -> None:
        await aredis.lpush(inflight, raws[i])
        assert await handoff.finish(Claimed("src", raws[i], inflight=inflight), alerts[i], sinks)

    await hand_off(0, [])  # no sink: the alert is embedded
    first = Record.parse(await aredis.hget(keys.entry_records("src"), entry_digest(raws[0])))
    assert first is not None and first.alert == alerts[0] and first.sinks == [] and first.item == ""
    await hand_off(1, ["s1"])  # the parcel carries it
    await hand_off(2, ["s1"])
    await handoff.flush()
    stored = await aredis.hgetall(keys.entry_records("src"))
    records = {k.decode(): Record.parse(v) for k, v in stored.items()}
    assert sorted(records) == sorted(entry_digest(r) for r in raws[1:]), "trimmed to the newest archive_max"
    assert all(r is not None and r.alert.dead_letter.job_id in ("k1", "k2") and r.sinks == ["s1"]
               for r in records.values())
    buckets = [await aredis.hgetall(k) for k in await aredis.keys("dlq_bridge:stats:*")]
    assert sum(int(b[b"alerted"]) for b in buckets) == 3
    assert 0 < await aredis.ttl((await aredis.keys("dlq_bridge:stats:*"))[0]) <= 7200
