"""Dramatiq's dead messages as Dramatiq rarely writes them: the table, large and odd bodies, the trim rule."""

from __future__ import annotations

import json
import tomllib

import redis
import redis.asyncio as aioredis

from bridge.sources.dramatiq_xq import MAX_MESSAGE_BYTES, DramatiqJudge, dramatiq_source, map_message
from bridge.sources.kind_registry import kind_sources
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import dead_letter, to_raw
from bridge.stores.cursor import Position

TRACEBACK = 'Traceback (most recent call last):\n  File "a.py", line 1, in f\n    raise X\napp.CardDeclined: no funds\n'


def letter_of(queue: str, body: bytes | None, died_ms: str = "1796406288280") -> KindRecord:
    mapped = map_message(queue, "redis-id", body, died_ms)
    return KindRecord("dramatiq:dramatiq:billing.XQ", mapped.queue, mapped.job_id, to_raw(mapped),
                      Receipt(source="t", token="x"))


def test_the_table_names_the_source_by_its_namespace_and_says_the_broker_ttl() -> None:
    tables = kind_sources(tomllib.loads('[[dramatiq]]\n[[dramatiq]]\nnamespace = "app"\ndead_message_ttl_s = 60\n'))
    first, second = tables.all()
    assert (first.source_name(), second.source_name()) == ("dramatiq", "dramatiq.app")
    assert first.dead_message_ttl_s == 7 * 24 * 3600 and second.dead_message_ttl_s == 60


def test_a_message_after_retries_gives_actor_attempts_error_and_time_and_its_secrets_are_redacted() -> None:
    body = {"queue_name": "billing.DQ", "actor_name": "charge", "args": [7], "message_id": "m-1",
            "kwargs": {"password": "hunter2hunter2"}, "options": {"retries": 2, "traceback": TRACEBACK}}
    letter = dead_letter(letter_of("billing", json.dumps(body).encode()))
    assert (letter.queue, letter.job_id, letter.job_name, letter.attempts) == ("billing", "m-1", "charge", 3)
    assert letter.last_error == "app.CardDeclined: no funds"
    assert letter.first_failed_at is not None and letter.first_failed_at.startswith("2026-12-04")
    assert "hunter2hunter2" not in letter.model_dump_json()


def test_a_message_dead_on_its_first_attempt_has_one_attempt_and_no_error() -> None:
    body = {"actor_name": "charge", "args": [], "kwargs": {}, "message_id": "m-2", "options": {}}
    letter = dead_letter(letter_of("billing", json.dumps(body).encode()))
    assert (letter.attempts, letter.last_error, letter.parse_error) == (1, None, None)


def test_a_body_that_is_not_a_dramatiq_message_is_named_by_its_redis_id() -> None:
    letter = dead_letter(letter_of("billing", b"\xff[ not json"))
    assert letter.job_id == "redis-id" and letter.job_name is None and letter.attempts is None


async def test_a_body_over_the_bound_is_not_read(redis_url: str, clean_redis: redis.Redis) -> None:
    clean_redis.zadd("dramatiq:big.XQ", {"r1": 1_796_406_288_280})
    clean_redis.hset("dramatiq:big.XQ.msgs", "r1", b'{"actor_name": "x", "pad": "' + b"a" * MAX_MESSAGE_BYTES + b'"}')
    client = aioredis.Redis.from_url(redis_url)
    try:
        record = await dramatiq_source("dramatiq", client, client).claim()
    finally:
        await client.aclose()
    assert record is not None and record.job_id == "r1" and len(record.raw) < 1024
    assert dead_letter(record).job_name is None


async def test_only_a_message_gone_near_its_dead_message_ttl_counts_as_the_broker_s_trim() -> None:
    judge = DramatiqJudge(dead_message_ttl_s=3600)
    died = Position(score="1000000", member_id="r1")  # died at t = 1000 s
    assert await judge.why_gone(None, "k", died, now_s=1000 + 3000) == "retried"  # type: ignore[arg-type]
    assert await judge.why_gone(None, "k", died, now_s=1000 + 3550) is None  # type: ignore[arg-type]
