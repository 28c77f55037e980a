"""The kind intake: the route's queue is the record's, and it keys the alert (`<queue>:<job_id>`)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from bridge.core.claimed import Claimed, entry_digest
from bridge.core.models import DeadLetter
from bridge.drain.pipeline import intake, intake_of
from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings, SourcesSettings
from bridge.sources.kind_port import KindPort
from bridge.sources.kinds import KindReader, KindRecord, Receipt
from bridge.stores import keys
from tests.support.http_server import serve
from tests.support.receiver import Receiver


def record(source_key: str, queue: str, job_id: str, **payload: object) -> KindRecord:
    raw = json.dumps({"queue": queue, "job_id": job_id, **payload}).encode()
    return KindRecord(source_key, queue, job_id, raw, Receipt("s", "t"))


def kind_intake(record: KindRecord, settings: SourcesSettings) -> DeadLetter:
    claimed = Claimed(record.source_key.split(":")[0], record.raw, queue=record.queue, receipt=record.receipt,
                      origin=record.source_key)
    return intake_of(claimed, settings)


def port(runtime: Runtime, reader: KindReader) -> KindPort:
    """`reader` behind the source port, as the runtime builds the configured kinds."""
    settings = runtime.settings
    return KindPort(reader, runtime.redis, settings.redis.consumer_id,
                    heartbeat_ttl_s=settings.sources.heartbeat_ttl_s, archive_max=settings.sources.archive_max)


async def drain(runtime: Runtime, reader: KindReader) -> None:
    """The one drain loop over `reader`'s port, in burst mode, and its in-flight entries."""
    await runtime.pipeline.drain(port(runtime, reader), asyncio.Event(), burst=True)
    await runtime.pipeline.drain_in_flight()


def test_every_kind_keys_its_alerts_queue_colon_job_id_with_the_route_s_queue() -> None:
    settings = SourcesSettings()
    sidekiq = kind_intake(record("sidekiq:dead", "default", "1"), settings)
    rq = kind_intake(record("rq:rq:failed:default", "default", "1"), settings)
    listed = intake(json.dumps({"job_id": "1", "queue": "elsewhere"}).encode(), "dead_letter:default", settings)
    assert sidekiq.idempotency_key == rq.idempotency_key == listed.idempotency_key == "default:1"


def test_the_route_queue_is_the_records_never_the_payloads() -> None:
    raw = json.dumps({"queue": "page-everyone", "job_id": "7", "last_error": "E: x"}).encode()
    letter = kind_intake(KindRecord("redis_stream:dead_letters", "dead_letters", "7", raw, Receipt("s", "t")),
                         SourcesSettings())
    assert letter.queue == "dead_letters"
    assert letter.reported_queue == "page-everyone"
    assert letter.source_kind == "redis_stream"


async def test_two_kinds_sharing_a_queue_name_and_job_id_both_alert(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """One Idempotency-Key, two dead letters: the ledger (key + raw digest) keeps both alerts."""
    sidekiq = FakeKind([record("sidekiq:dead", "default", "1", last_error="SidekiqError: a")], "sidekiq")
    rq = FakeKind([record("rq:rq:failed:default", "default", "1", last_error="RQError: b")], "rq")
    hook = Receiver()
    async with serve(hook.app) as url:
        sinks = [{"name": "api", "type": "webhook", "url": f"{url}/in", "secret": "s"}]
        async with open_runtime(make_settings(sources={"match": ""}, sinks=sinks)) as runtime:
            for source in (sidekiq, rq):
                await drain(runtime, source)
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
    assert sorted(json.loads(r.body)["last_error"] for r in hook.requests) == ["RQError: b", "SidekiqError: a"]
    assert {r.headers["idempotency-key"] for r in hook.requests} == {"default:1"}


class FakeKind:
    """A consumable kind holding a few records; remembers what was acknowledged."""

    def __init__(self, records: list[KindRecord], name: str = "fake") -> None:
        self.records = list(records)
        self.acked: list[str] = []
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def claim(self) -> KindRecord | None:
        return self.records.pop(0) if self.records else None

    async def ack(self, receipt: Receipt) -> bool:
        self.acked.append(receipt.token)
        return True

    async def rescan(self) -> list[str]:

        return []


    async def depth(self) -> int:
        return len(self.records)

    async def close(self) -> None:
        return None


def fake_record(job_id: str) -> KindRecord:
    raw = json.dumps({"queue": "orders", "job_id": job_id, "last_error": "E: boom"}).encode()
    return KindRecord("redis_stream:fake", "orders", job_id, raw, Receipt("fake", job_id))


async def test_each_record_is_archived_then_acknowledged(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    source = FakeKind([fake_record("a"), fake_record("b")])
    async with open_runtime(make_settings(sources={"match": ""}), stdout=io.StringIO()) as runtime:
        await drain(runtime, source)
    assert sorted(source.acked) == ["a", "b"]
    archived = await aredis.lrange(keys.alerted("fake"), 0, -1)
    assert sorted(json.loads(r)["job_id"] for r in archived) == ["a", "b"]


async def test_a_pipeline_error_on_a_record_is_recorded_and_the_record_acked(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = FakeKind([fake_record("a")])
    async with open_runtime(make_settings(sources={"match": ""}), stdout=io.StringIO()) as runtime:

        async def broken(_letter: object) -> None:
            raise ValueError("a bug")

        monkeypatch.setattr(runtime.pipeline, "_alert_for", broken)
        await drain(runtime, source)
    assert source.acked == ["a"], "not retried forever: recorded, archived, then acknowledged"
    assert len(await aredis.lrange(keys.alerted("fake"), 0, -1)) == 1
    [stored] = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    assert json.loads(stored)["error"] == "pipeline error: ValueError"


async def test_a_record_past_the_intake_deadline_is_handed_off_and_archived_never_sent_from_the_drain(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from bridge.drain import pipeline

    release = threading.Event()
    real = pipeline.intake_of

    def stuck(claimed: Claimed, settings: SourcesSettings) -> object:
        if b'"stuck"' in claimed.raw:
            release.wait(5)
        return real(claimed, settings)

    monkeypatch.setattr(pipeline, "intake_of", stuck)
    source = FakeKind([fake_record("stuck")])
    hook = Receiver()
    try:
        async with serve(hook.app) as url:
            settings = make_settings(sources={"match": "", "entry_deadline_s": 0.3},
                                     sinks=[{"name": "hook", "type": "webhook", "url": f"{url}/in", "secret": "s"}])
            async with open_runtime(settings, stdout=io.StringIO()) as runtime:
                stop = asyncio.Event()
                delivery = asyncio.create_task(runtime.delivery.run(stop))
                await drain(runtime, source)
                assert source.acked == ["stuck"], "acknowledged after its hand-off"
                deadline = time.monotonic() + 10
                while not hook.requests and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                stop.set()
                await delivery
    finally:
        release.set()
    [kept] = await aredis.lrange(keys.quarantine("fake"), 0, -1)
    assert json.loads(kept)["job_id"] == "stuck", "a copy kept in the quarantine list, like a list entry's"
    assert await aredis.lrange(keys.inflight("fake", "test-1"), 0, -1) == []
    [sent] = hook.requests
    body = json.loads(sent.body)
    assert body["job_id"] == "quarantined:stuck" and body["summary"]["title"].startswith("Quarantined dead letter")


async def test_a_kind_record_past_its_solo_deaths_is_quarantined_and_acked_while_its_bystander_alerts(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """The lists' guarantee, for a kind: a death held against a record only while it ran alone."""
    pill, bystander = fake_record("pill"), fake_record("bystander")
    await aredis.set(keys.claims("fake", entry_digest(pill.raw)), 3)  # three deaths while it ran alone
    await aredis.set(keys.claims("fake", entry_digest(bystander.raw)), 0)  # held during a death: a suspect
    source = FakeKind([pill, bystander])
    async with open_runtime(make_settings(sources={"match": ""}), stdout=io.StringIO()) as runtime:
        await drain(runtime, source)
    assert sorted(source.acked) == ["bystander", "pill"], "both acknowledged, each after its hand-off"
    assert await aredis.lrange(keys.quarantine("fake"), 0, -1) == [pill.raw]
    archived = await aredis.lrange(keys.alerted("fake"), 0, -1)
    assert [json.loads(r)["job_id"] for r in archived] == ["bystander"]
    assert not await aredis.exists(keys.claims("fake", entry_digest(bystander.raw))), "cleared by its hand-off"
    assert await aredis.lrange(keys.inflight("fake", "test-1"), 0, -1) == []
