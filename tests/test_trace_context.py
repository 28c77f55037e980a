"""W3C trace context read from dead letters: valid values kept, malformed or hostile ones dropped."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from bridge.config.tracing import TracingSettings
from bridge.core.trace_context import TraceContext, parse_tracestate
from bridge.intake.chain import normalize
from bridge.sources.kinds import KindRecord
from bridge.sources.mapping import Mapped, dead_letter, to_raw

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"


@pytest.mark.parametrize("flags", ["00", "01", "03", "ff"])
def test_any_flags_are_accepted(flags: str) -> None:
    """Celery's OpenTelemetry SDK sets `03` (the level-2 random bit): a parser taking only `01` drops it."""
    context = TraceContext.parse(f"00-{TRACE}-{SPAN}-{flags}")
    assert context is not None and context.flags == flags and context.trace_id == TRACE


def test_bytes_from_amqp_headers_are_read() -> None:
    assert TraceContext.parse(VALID.encode()) == TraceContext(TRACE, SPAN, "01")


def test_a_later_version_with_more_fields_is_read_as_version_00() -> None:
    context = TraceContext.parse(f"cc-{TRACE}-{SPAN}-01-what-the-future-holds")
    assert context is not None and context.traceparent == VALID


@pytest.mark.parametrize(
    "hostile",
    [
        VALID + "0",  # version 00 is exactly 55 characters
        VALID.upper(),  # lowercase hex only
        f"ff-{TRACE}-{SPAN}-01",  # version ff is invalid
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero span id
        f"00-{TRACE}-{SPAN}-0g",
        f"00_{TRACE}-{SPAN}-01",
        f"00-{TRACE[:-1]}x-{SPAN}-01",
        VALID[:-2] + "\r\n",
        f"00-{TRACE}-{SPAN}-01\r\nX-Injected: 1",
        "https://evil.example/?t=" + VALID,
        f"cc-{TRACE}-{SPAN}-01x",  # a later version's extra fields start with a dash
        "00-" + "a" * 10_000,
        "",
        "00",
        b"\xff\xfe" + VALID.encode(),
        12345,
        None,
        {"traceparent": VALID},
    ],
)
def test_malformed_or_hostile_values_are_dropped(hostile: object) -> None:
    assert TraceContext.parse(hostile) is None


@given(st.text(max_size=80))
def test_whatever_is_accepted_is_rebuilt_from_checked_hex(text: str) -> None:
    context = TraceContext.parse(text)
    if context is not None:
        assert len(context.traceparent) == 55
        assert set(context.traceparent) <= set("0123456789abcdef-")


def test_tracestate_is_kept_when_every_member_is_valid() -> None:
    assert parse_tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE") == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert parse_tracestate("tenant@vendor=x") == "tenant@vendor=x"


@pytest.mark.parametrize(
    "bad", ["no-equals", "Upper=1", "a=1,a=2", "a=b\r\nc=d", "a=" + "x" * 600, ",".join(f"k{i}=v" for i in range(33))]
)
def test_a_malformed_tracestate_is_dropped_whole(bad: str) -> None:
    assert parse_tracestate(bad) is None
    context = TraceContext.parse(VALID, bad)
    assert context is not None and context.tracestate is None


def test_aws_trace_header_is_converted() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    context = TraceContext.from_aws_trace_header(header)
    assert context is not None
    assert context.traceparent == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


@pytest.mark.parametrize(
    "header",
    [
        "Root=1-5759e988-bd862e3fe1be46a994272793",  # no parent
        "Root=1-5759E988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
        "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
        "Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad",
    ],
)
def test_a_malformed_aws_trace_header_is_dropped(header: str) -> None:
    assert TraceContext.from_aws_trace_header(header) is None


def test_an_envelope_traceparent_becomes_part_of_the_dead_letter() -> None:
    raw = json.dumps({"job_id": "j1", "traceparent": f"00-{TRACE}-{SPAN}-03", "tracestate": "rojo=1"}).encode()
    letter = normalize(raw, "dead_letter:emails")
    assert letter.traceparent == f"00-{TRACE}-{SPAN}-03" and letter.tracestate == "rojo=1"
    assert letter.trace is not None and letter.trace.trace_id == TRACE


@pytest.mark.parametrize("hostile", [VALID + "\nX: y", "https://evil.example/" + TRACE, VALID.upper()])
def test_a_hostile_envelope_traceparent_is_not_kept_anywhere(hostile: str) -> None:
    letter = normalize(json.dumps({"job_id": "j1", "traceparent": hostile}).encode(), "dead_letter:emails")
    assert letter.traceparent is None and letter.trace is None


def test_a_secret_shaped_tracestate_is_dropped_by_redaction() -> None:
    state = "vendor=ghp_" + "a" * 36
    letter = normalize(json.dumps({"job_id": "j", "traceparent": VALID, "tracestate": state}).encode(), "dead_letter:q")
    assert letter.traceparent == VALID and letter.tracestate is None


def test_a_kind_record_carries_its_trace_context_into_the_envelope() -> None:
    mapped = Mapped(queue="default", job_id="42", job_name="Mailer", traceparent=VALID)
    record = KindRecord("sidekiq:dead", "default", "42", to_raw(mapped), "r")
    assert dead_letter(record).traceparent == VALID


def test_a_kind_record_without_trace_context_keeps_its_raw_bytes() -> None:
    """The raw digest of a job without trace context is what release 0.2.0 computes for it."""
    raw = to_raw(Mapped(queue="default", job_id="42"))
    assert b"trace" not in raw


def test_trace_url_takes_the_validated_id_only() -> None:
    settings = TracingSettings(trace_url="https://tempo.example/explore?traceId={trace_id}")
    assert settings.trace_link(TRACE) == f"https://tempo.example/explore?traceId={TRACE}"
    assert TracingSettings().trace_link(TRACE) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://tempo.example/explore",
        "https://tempo.example/{trace_id}/{trace_id}",
        "https://tempo.example/{trace_id}?x={span_id}",
        "javascript:alert(1)//{trace_id}",
        "ftp://tempo.example/{trace_id}",
    ],
)
def test_a_trace_url_that_could_carry_anything_else_is_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        TracingSettings(trace_url=url)
