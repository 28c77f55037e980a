"""Hostile oversized entries through the streamed identity read, and the quarantine alert's head read."""

from __future__ import annotations

import json
import logging

import ijson
import pytest

from bridge.core.models import Severity
from bridge.drain.quarantine import HEAD_BYTES, quarantine_alert
from bridge.intake.chain import normalize
from bridge.intake.streamed_fields import backend, read_top_fields

LIMIT = 1024 * 1024  # entries below are all over it: never parsed whole
PAD = "p" * (2 * LIMIT)


def oversized(raw: bytes) -> tuple[str, str | None, str | None]:
    dl = normalize(raw, "dead_letter:q", max_parse_bytes=LIMIT)
    assert dl.parse_error is not None and dl.parse_error.startswith("oversized dead letter")
    return dl.job_id, dl.job_name, dl.last_error


def test_the_c_backend_is_used() -> None:
    assert backend().backend_name == "yajl2_c"


def test_without_the_c_backend_the_python_one_reads_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = ijson.get_backend

    def no_c(name: str) -> object:
        if name == "yajl2_c":
            raise ImportError("no yajl")
        return real(name)

    monkeypatch.setattr(ijson, "get_backend", no_c)
    backend.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, "bridge.intake.streamed_fields"):
            for _ in range(2):
                assert oversized(json.dumps({"x": PAD, "job_id": "py-backend"}).encode())[0] == "py-backend"
        assert backend().backend_name == "python"
        (record,) = caplog.records  # once, for two oversized entries
        assert "yajl2_c" in record.getMessage()
    finally:
        backend.cache_clear()


def test_a_huge_string_value_before_the_fields_is_streamed_past() -> None:
    raw = json.dumps({"blob": PAD, "job_id": "after-blob", "job_name": "Resize", "last_error": "E"}).encode()
    assert oversized(raw) == ("after-blob", "Resize", "E")


def test_deep_nesting_is_skipped_and_nested_names_are_not_taken() -> None:
    deep = '{"job_id": "inner", "a": ' * 50_000 + "1" + "}" * 50_000
    raw = ('{"payload": ' + deep + ', "job_id": "outer", "x": "' + PAD + '"}').encode()
    assert oversized(raw)[0] == "outer"


def test_invalid_json_after_the_fields_keeps_them() -> None:
    raw = b'{"job_id": "j-7", "name": "Mail", "error": "SMTP 421", "payload": [1, 2, ' + PAD.encode() + b"}}}"
    assert oversized(raw) == ("j-7", "Mail", "SMTP 421")


def test_a_job_id_that_is_not_a_string() -> None:
    assert oversized(json.dumps({"job_id": 12345, "x": PAD}).encode())[0] == "12345"
    structured = oversized(json.dumps({"job_id": {"a": 1}, "jid": "sidekiq-1", "x": PAD}).encode())
    assert structured[0] == "sidekiq-1"  # a structure is not an id: the next alias is
    assert oversized(json.dumps({"job_id": True, "x": PAD}).encode())[0].startswith("sha256:")


def test_a_huge_error_is_cut_from_the_bytes_and_stays_redacted() -> None:
    raw = json.dumps({"job_id": "e", "last_error": "token=hunter2xyz " + "\\u00e9" * LIMIT}).encode()
    job_id, _, error = oversized(raw)
    assert job_id == "e" and error is not None and "hunter2xyz" not in error and len(error) < 8300


def test_reading_stops_once_every_group_is_found() -> None:
    raw = b'{"job_id": "first", "last_error": "E", "tail": ' + b"[" * 10 + b"garbage"
    assert read_top_fields(raw, [("job_id",), ("last_error",)]) == {"job_id": "first", "last_error": "E"}


def test_a_quarantine_alert_names_the_job_from_the_first_bytes() -> None:
    raw = json.dumps({"job_id": "poison-9", "job_name": "explode", "last_error": "password=s3cr3t boom",
                      "payload": PAD}).encode()
    alert = quarantine_alert("dead_letter:poison", "d" * 16, Severity.CRITICAL, "Quarantined", raw)
    dl = alert.dead_letter
    assert (dl.job_id, dl.job_name, dl.last_error) == ("quarantined:poison-9", "explode", "password=[REDACTED] boom")
    assert dl.payload_excerpt is None and alert.idempotency_key == "poison:quarantined:poison-9"


def test_a_quarantine_alert_falls_back_to_the_digest() -> None:
    late = json.dumps({"payload": "p" * HEAD_BYTES, "job_id": "too-late"}).encode()
    for raw in (late, b"\xff\xfe not json", b"[1, 2]"):
        alert = quarantine_alert("dead_letter:poison", "d" * 16, Severity.CRITICAL, "Quarantined", raw)
        assert alert.dead_letter.job_id == "quarantined:sha256:" + "d" * 16
