"""Kind configuration (docs/design.md, section 2b) and the mapping of native records that real
producers rarely write."""

from __future__ import annotations

import base64
import json
import tomllib
import zlib
from datetime import datetime

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from bridge.core.errors import ConfigError
from bridge.sources import rabbitmq, redis_stream, rq, sidekiq, sqs
from bridge.sources.build import build_kind_sources
from bridge.sources.kind_registry import kind_sources
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import dead_letter, split_error, to_raw

DESIGN_2B = """
[sources]
match = "dead_letter:*"

[[sources.sidekiq]]
redis_url_env = "SIDEKIQ_REDIS_URL"
namespace = ""

[[sources.bullmq]]
prefix = "bull"
queues = []

[[sources.rq]]
queues = []

[[sources.redis_stream]]
stream = "dead_letters"
group = "dlq-bridge"

[[sources.rabbitmq]]
url_env = "RABBITMQ_URL"
queue = "orders.dlq"

[[sources.sqs]]
queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dlq"
endpoint_url = "http://127.0.0.1:4566"
"""


def receipt() -> Receipt:
    return Receipt(source="t", token="x")


def test_the_design_tables_parse_into_uniquely_named_sources() -> None:
    kinds = kind_sources(tomllib.loads(DESIGN_2B)["sources"])
    assert [k.source_name() for k in kinds.all()] == [
        "sidekiq",
        "bullmq.bull",
        "rq",
        "stream.dead_letters",
        "rabbitmq.orders.dlq",
        "sqs.orders-dlq",
    ]
    assert kinds.sqs[0].region_from_url() == "eu-west-1"


def test_two_sources_with_one_name_are_refused_with_a_hint() -> None:
    with pytest.raises(ValidationError, match="give one of them its own `name`"):
        kind_sources({"sidekiq": [{}, {"redis_url_env": "OTHER_REDIS"}]})
    kinds = kind_sources({"sidekiq": [{}, {"redis_url_env": "OTHER_REDIS", "name": "sidekiq.eu"}]})
    assert [k.source_name() for k in kinds.sidekiq] == ["sidekiq", "sidekiq.eu"]


def test_unknown_keys_and_bad_urls_are_refused() -> None:
    with pytest.raises(ValidationError):
        kind_sources({"rq": [{"queue": "typo"}]})
    with pytest.raises(ValidationError):
        kind_sources({"sqs": [{"queue_url": "file:///etc/passwd"}]})


async def test_a_missing_connection_variable_names_the_variable(redis_url: str) -> None:
    pytest.importorskip("boto3", reason="sqs: boto3 is not installed (run scripts/install-peers)")
    kinds = kind_sources(tomllib.loads(DESIGN_2B)["sources"])
    bridge = aioredis.Redis.from_url(redis_url)
    try:
        with pytest.raises(ConfigError, match="SIDEKIQ_REDIS_URL"):
            build_kind_sources(kinds, bridge=bridge, consumer_id="c1", environ={})
        env = {"SIDEKIQ_REDIS_URL": redis_url, "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:5672/"}
        built = build_kind_sources(kinds, bridge=bridge, consumer_id="c1", environ=env)
        assert [s.name for s in built.sources] == [k.source_name() for k in kinds.all()]
        await built.close()
    finally:
        await bridge.aclose()


def test_an_active_job_dead_in_sidekiq_is_named_by_its_job_class() -> None:
    wrapper = {
        "class": sidekiq.ACTIVE_JOB_WRAPPER,
        "wrapped": "ShipOrderJob",
        "queue": "default",
        "jid": "abc",
        "args": [{"job_class": "ShipOrderJob", "arguments": [1]}],
        "error_class": "Net::ReadTimeout",
        "error_message": "Net::ReadTimeout with #<TCPSocket:(closed)>",
        "failed_at": 1764460800.5,
        "retry_count": 24,
    }
    mapped = sidekiq.map_job(wrapper)
    assert (mapped.job_name, mapped.attempts, mapped.error_class) == ("ShipOrderJob", 25, "Net::ReadTimeout")
    without_wrapped = {k: v for k, v in wrapper.items() if k != "wrapped"}
    assert sidekiq.job_name(without_wrapped) == "ShipOrderJob"
    letter = dead_letter(KindRecord("sidekiq:dead", "default", "abc", to_raw(mapped), receipt()))
    assert letter.last_error == "Net::ReadTimeout: Net::ReadTimeout with #<TCPSocket:(closed)>"
    assert letter.first_failed_at is not None and datetime.fromisoformat(letter.first_failed_at).year == 2025


def test_secrets_in_native_fields_are_redacted_by_the_shared_normalization() -> None:
    job = {"class": "W", "queue": "q", "jid": "j", "args": [{"password": "hunter2"}], "error_message": "token=abc123"}
    letter = dead_letter(KindRecord("sidekiq:dead", "q", "j", to_raw(sidekiq.map_job(job)), receipt()))
    dumped = letter.model_dump_json()
    assert "hunter2" not in dumped and "abc123" not in dumped


def test_rq_exception_text_is_inflated_with_a_bound_and_never_unpickled() -> None:
    traceback = "Traceback (most recent call last):\n  File 'x'\napp.errors.Declined: card declined\n"
    encoded = base64.b64encode(zlib.compress(traceback.encode()))
    mapped = rq.map_job("billing", "j1", {"description": "app.pay(1)"}, [{b"exc_string": encoded}])
    assert (mapped.error_class, mapped.error_message, mapped.job_name) == (
        "app.errors.Declined",
        "card declined",
        "app.pay",
    )
    bomb = base64.b64encode(zlib.compress(b"A" * (50 * 1024 * 1024)))
    assert len(rq.exc_text(bomb) or "") == rq.MAX_EXC_BYTES
    assert rq.exc_text(b"!!not base64 or zlib") is None


def test_split_error_reads_class_heads_only() -> None:
    assert split_error("TypeError: boom") == ("TypeError", "boom")
    assert split_error("Net::ReadTimeout: slow") == ("Net::ReadTimeout", "slow")
    assert split_error("order 7 has no address") == (None, "order 7 has no address")
    assert split_error("") == (None, None)


def test_a_stream_entry_without_payload_is_taken_as_a_flat_object_with_the_message_id() -> None:
    raw = redis_stream.entry_raw("1700000000000-0", {b"job_name": b"ship", b"last_error": b"E: m"})
    assert json.loads(raw) == {"job_name": "ship", "last_error": "E: m", "job_id": "1700000000000-0"}
    assert redis_stream.entry_raw("1-0", {b"payload": b"[1, 2]"}) == b"[1, 2]"


def test_a_plain_message_dead_lettered_by_rabbitmq_keeps_its_own_fields() -> None:
    death = {"count": 3, "reason": "expired", "queue": "emails", "time": datetime(2026, 11, 30, 12, 0)}
    headers = {"x-death": [death], "x-first-death-queue": "emails", "x-first-death-reason": "expired"}
    body = json.dumps({"job_id": "m-1", "job_name": "send_welcome", "last_error": "SMTPError: 421"}).encode()
    record = rabbitmq.message_record(headers, body, "emails.dlq", "msg-1", receipt())
    letter = dead_letter(record)
    assert (letter.queue, letter.job_id, letter.attempts) == ("emails", "m-1", 3)
    assert letter.last_error == "SMTPError: 421"
    assert letter.first_failed_at == "2026-11-30T12:00:00+00:00"


def test_an_sqs_body_that_is_not_json_becomes_an_unparseable_dead_letter() -> None:
    raw, job_id = sqs.message_raw({"MessageId": "m-9", "Body": "\x00 not json {", "Attributes": {}})
    letter = dead_letter(KindRecord("sqs:q", "q", job_id, raw, receipt()))
    assert letter.parse_error is not None and job_id == "m-9"
