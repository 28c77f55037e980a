"""Trace context read where each job system keeps it, into the envelope; hostile values dropped.

The mappers get the job as each job system stores it (field names and encodings as the real
instrumentations write them: tests/kinds/test_trace_real.py produces them for real).
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from bridge.core.models import DeadLetter
from bridge.intake.chain import normalize
from bridge.sources import bullmq, dramatiq_xq, rabbitmq, redis_stream, rq, sidekiq, sqs
from bridge.sources.kinds import KindRecord
from bridge.sources.mapping import Mapped, dead_letter, to_raw

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-03"
HOSTILE = [
    VALID + "0" * 300,  # too long
    f"00-{TRACE}-{SPAN}-01-extra",  # version 00 with more fields
    f"0g-{TRACE}-{SPAN}-01",  # wrong version
    f"ff-{TRACE}-{SPAN}-01",
    f"00-{TRACE[:-1]}z-{SPAN}-01",  # non-hex
    VALID[:-2] + "\r\nX-Injected: 1",  # CR/LF
    "https://evil.example/?t=" + TRACE,  # a URL
]


def _letter(mapped: Mapped) -> DeadLetter:
    return dead_letter(KindRecord("k:store", mapped.queue, mapped.job_id, to_raw(mapped), "r"))


def _sidekiq(value: Any) -> Mapped:
    return sidekiq.map_job({"jid": "j1", "class": "Charge", "queue": "billing", "traceparent": value})


def _celery(value: Any) -> Mapped:
    headers = {"id": "t1", "task": "app.charge", "traceparent": value, "x-first-death-queue": "celery"}
    return rabbitmq.map_celery(headers, b"[]", "celery.dlq", "m1")


def _bullmq(value: Any) -> Mapped:
    opts = json.dumps({"attempts": 2, "tm": json.dumps({"traceparent": value})})
    return bullmq.map_job("orders", "7", {b"name": b"charge", b"opts": opts.encode()})


def _rq(value: Any) -> Mapped:
    meta = json.dumps({"traceparent": value}).encode()
    return rq.map_job("default", "r1", {"description": "app.charge(1)", "meta": meta}, [])


def _dramatiq(value: Any) -> Mapped:
    body = json.dumps({"message_id": "d1", "actor_name": "charge", "options": {"trace_ctx": {"traceparent": value}}})
    return dramatiq_xq.map_message("default", "x1", body.encode(), "1700000000000")


CARRIERS = {"sidekiq": _sidekiq, "celery": _celery, "bullmq": _bullmq, "rq": _rq, "dramatiq": _dramatiq}


@pytest.mark.parametrize("kind", CARRIERS)
def test_each_kind_reads_the_trace_context_its_job_system_keeps(kind: str) -> None:
    letter = _letter(CARRIERS[kind](VALID))
    assert letter.traceparent == VALID
    assert letter.trace is not None and letter.trace.trace_id == TRACE


@pytest.mark.parametrize("kind", CARRIERS)
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_traceparent_in_any_carrier_is_dropped_and_not_echoed(kind: str, hostile: str) -> None:
    mapped = CARRIERS[kind](hostile)
    assert mapped.traceparent is None
    assert hostile.encode() not in to_raw(mapped) and _letter(mapped).traceparent is None


def test_celery_header_values_as_bytes_and_nested_headers_are_read() -> None:
    assert _celery(VALID.encode()).traceparent == VALID
    nested = {"id": "t1", "task": "app.charge", "headers": {"traceparent": VALID, "tracestate": "rojo=1"}}
    mapped = rabbitmq.map_celery(nested, b"[]", "celery.dlq", "m1")
    assert (mapped.traceparent, mapped.tracestate) == (VALID, "rojo=1")


def test_a_failed_bullmq_job_top_level_tm_field_is_read() -> None:
    fields = {b"name": b"charge", b"opts": b"{}", b"tm": json.dumps({"traceparent": VALID}).encode()}
    assert bullmq.map_job("orders", "7", fields).traceparent == VALID


def test_a_pickled_rq_meta_is_never_loaded() -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (print, ("unpickled!",))

    meta = pickle.dumps({"traceparent": VALID, "x": Boom()})
    assert rq.map_job("default", "r1", {"meta": meta}, []).traceparent is None


def test_dramatiq_options_traceparent_of_an_own_middleware_is_read() -> None:
    body = json.dumps({"message_id": "d1", "actor_name": "charge", "options": {"traceparent": VALID}})
    assert dramatiq_xq.map_message("default", "x1", body.encode(), "1").traceparent == VALID


def _sqs_letter(message: dict[str, Any]) -> DeadLetter:
    raw, _job = sqs.message_raw({"MessageId": "m1", "Body": json.dumps({"job_id": "s1"}), **message})
    return normalize(raw, "sqs:orders-dlq")


def test_sqs_reads_the_traceparent_message_attribute_first() -> None:
    attribute = {"traceparent": {"DataType": "String", "StringValue": VALID}}
    aws = {"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}
    assert _sqs_letter({"MessageAttributes": attribute, "Attributes": aws}).traceparent == VALID


def test_sqs_converts_aws_trace_header_without_a_traceparent() -> None:
    aws = {"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}
    letter = _sqs_letter({"Attributes": aws})
    assert letter.traceparent == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_sqs_attribute_never_reaches_the_envelope(hostile: str) -> None:
    letter = _sqs_letter({"MessageAttributes": {"traceparent": {"DataType": "String", "StringValue": hostile}}})
    assert letter.traceparent is None and hostile not in letter.model_dump_json()


def test_a_stream_traceparent_field_is_read_flat_or_beside_a_payload() -> None:
    flat = redis_stream.entry_raw("1-0", {b"job_id": b"s1", b"traceparent": VALID.encode()})
    beside = redis_stream.entry_raw("1-0", {b"payload": b'{"job_id": "s1"}', b"traceparent": VALID.encode()})
    assert normalize(flat, "redis_stream:dlq").traceparent == VALID
    assert normalize(beside, "redis_stream:dlq").traceparent == VALID


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_stream_field_is_dropped(hostile: str) -> None:
    raw = redis_stream.entry_raw("1-0", {b"payload": b'{"job_id": "s1"}', b"traceparent": hostile.encode()})
    assert hostile.encode() not in raw and normalize(raw, "redis_stream:dlq").traceparent is None
