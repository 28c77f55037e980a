"""The kind intake: the route's queue is the record's, and Idempotency-Keys of kinds never collide."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from bridge import keys
from bridge.kind_pipeline import KindDrain, kind_intake
from bridge.pipeline import intake
from bridge.runtime import open_runtime
from bridge.settings import Settings, SourcesSettings
from bridge.sources.kinds import KindRecord, Receipt


def record(source_key: str, queue: str, job_id: str, **payload: object) -> KindRecord:
    raw = json.dumps({"queue": queue, "job_id": job_id, **payload}).encode()
    return KindRecord(source_key, queue, job_id, raw, Receipt("s", "t"))


def test_two_kinds_with_one_queue_name_and_job_id_get_different_keys() -> None:
    settings = SourcesSettings()
    sidekiq = kind_intake(record("sidekiq:dead", "default", "1"), settings)
    rq = kind_intake(record("rq:rq:failed:default", "default", "1"), settings)
    listed = intake(json.dumps({"job_id": "1"}).encode(), "dead_letter:default", settings)
    assert sidekiq.idempotency_key == "sidekiq:default:1"
    assert rq.idempotency_key == "rq:default:1"
    assert listed.idempotency_key == "default:1"


def test_the_route_queue_is_the_records_never_the_payloads() -> None:
    raw = json.dumps({"queue": "page-everyone", "job_id": "7", "last_error": "E: x"}).encode()
    letter = kind_intake(KindRecord("redis_stream:dead_letters", "dead_letters", "7", raw, Receipt("s", "t")),
                         SourcesSettings())
    assert letter.queue == "dead_letters"
    assert letter.reported_queue == "page-everyone"
    assert letter.source_kind == "redis_stream"


class FakeKind:
    """A consumable kind holding a few records; remembers what was acknowledged."""

    def __init__(self, records: list[KindRecord]) -> None:
        self.records = list(records)
        self.acked: list[str] = []

    @property
    def name(self) -> str:
        return "fake"

    async def claim(self) -> KindRecord | None:
        return self.records.pop(0) if self.records else None

    async def ack(self, receipt: Receipt) -> bool:
        self.acked.append(receipt.token)
        return True

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
        drain = KindDrain(source, runtime.pipeline)
        await drain.run(asyncio.Event(), burst=True)
        await runtime.pipeline.drain_in_flight()
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

        monkeypatch.setattr(runtime.pipeline, "alert_for", broken)
        await KindDrain(source, runtime.pipeline).run(asyncio.Event(), burst=True)
        await runtime.pipeline.drain_in_flight()
    assert source.acked == ["a"], "not retried forever: recorded, then acknowledged"
    [stored] = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    assert json.loads(stored)["error"] == "pipeline error: ValueError"
