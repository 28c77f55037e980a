from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.models import DeadLetter
from bridge.drain.pipeline import intake
from bridge.intake.chain import normalize
from bridge.intake.envelope import raw_digest
from bridge.settings import SourcesSettings
from tests.conftest import envelope_entry


def test_envelope_shape_maps_every_field() -> None:
    dl = normalize(envelope_entry(), "dead_letter:orders")
    assert (dl.queue, dl.job_id, dl.job_name, dl.attempts) == ("orders", "job-1", "ship_order", 3)
    assert dl.correlation_id == "corr-1"
    assert dl.last_error == "TimeoutError: warehouse API timed out after 30s"
    assert dl.first_failed_at == "2026-11-30T00:00:00+00:00"
    assert dl.payload_excerpt == '{"order": 1}'
    assert dl.parse_error is None
    assert dl.idempotency_key == "orders:job-1"


def test_reliable_queue_shape_has_no_error_and_keeps_params() -> None:
    raw = json.dumps({"task_id": "t-9", "job_type": "resize", "params": {"w": 10}, "attempts": 4}).encode()
    dl = normalize(raw, "dead_letter:images")
    assert (dl.queue, dl.job_id, dl.job_name, dl.attempts) == ("images", "t-9", "resize", 4)
    assert dl.last_error is None
    assert dl.payload_excerpt == '{"w": 10}'


def test_a_structured_payload_excerpt_is_kept_as_json_and_redacted() -> None:
    raw = envelope_entry(payload_excerpt={"order": 7, "card": {"password": "hunter2"}, "items": list(range(5000))})
    dl = normalize(raw, "dead_letter:orders")
    assert dl.payload_excerpt is not None and dl.payload_excerpt.startswith('{"order": 7')
    assert len(dl.payload_excerpt) < 4096, "pruned to the excerpt budget, still JSON"
    json.loads(dl.payload_excerpt)
    redacted = intake(raw, "dead_letter:orders", SourcesSettings())
    assert redacted.payload_excerpt is not None and "hunter2" not in redacted.payload_excerpt


def test_job_id_falls_back_to_the_digest() -> None:
    raw = b'{"error": "boom"}'
    dl = normalize(raw, "dead_letter:q")
    assert dl.job_id == f"sha256:{raw_digest(raw)}"
    assert dl.last_error == "boom"


def test_garbage_bytes_become_an_unparseable_envelope() -> None:
    dl = normalize(b"\xff\xfe\x00binary", "dead_letter:imports")
    assert dl.parse_error is not None and "UTF-8" in dl.parse_error
    assert dl.queue == "imports"
    assert dl.job_id.startswith("sha256:")


def test_json_array_is_not_an_object() -> None:
    dl = normalize(b"[1, 2]", "dead_letter:q")
    assert dl.parse_error == "JSON array, not an object"


def test_deeply_nested_json_does_not_crash() -> None:
    dl = normalize(b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "dead_letter:q")
    assert dl.raw_digest
    assert len(dl.model_dump_json()) < 50_000


def test_ten_megabyte_payload_is_truncated_and_marked() -> None:
    raw = json.dumps({"job_id": "big", "last_error": "x" * 10_000_000, "payload": "y" * 10_000_000}).encode()
    dl = normalize(raw, "dead_letter:q", excerpt_max=2048, max_parse_bytes=32 * 1024 * 1024)
    assert dl.last_error is not None and "[truncated" in dl.last_error
    assert len(dl.last_error) < 9_000
    assert dl.payload_excerpt is not None and "[truncated" in dl.payload_excerpt
    assert len(dl.payload_excerpt) < 2_200


def test_control_and_bidi_characters_are_removed() -> None:
    dl = normalize(envelope_entry(last_error="bad\x00\x1b[31m\u202etext"), "dead_letter:q")
    assert dl.last_error == "bad[31mtext"


def test_identical_failures_share_a_fingerprint() -> None:
    a = normalize(
        envelope_entry(job_id="1", last_error="TimeoutError: order 123 id=ab12cd34ef timed out after 30s"),
        "dead_letter:o",
    )
    b = normalize(
        envelope_entry(job_id="2", last_error="TimeoutError: order 987 id=ff00ee11dd timed out after 31s"),
        "dead_letter:o",
    )
    c = normalize(envelope_entry(job_id="3", last_error="KeyError: 'sku'"), "dead_letter:o")
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_any_bytes_give_an_envelope(raw: bytes) -> None:
    dl = normalize(raw, "dead_letter:fuzz")
    assert isinstance(dl, DeadLetter)
    assert dl.raw_digest == raw_digest(raw)
    assert dl.job_id


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["job_id", "id", "attempts", "last_error", "error", "queue", "params", "failed_at", "job_name", "x"]
        ),
        json_values,
    )
)
def test_any_json_object_gives_an_envelope(obj: dict[str, object]) -> None:
    dl = normalize(json.dumps(obj).encode(), "dead_letter:fuzz")
    assert isinstance(dl, DeadLetter)
    assert dl.queue
