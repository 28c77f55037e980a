"""The kind intake: the route's queue is the record's, and Idempotency-Keys of kinds never collide."""

from __future__ import annotations

import json

from bridge.kind_pipeline import kind_intake
from bridge.pipeline import intake
from bridge.settings import SourcesSettings
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
