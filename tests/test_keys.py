from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from bridge.core import names
from bridge.stores import keys


@pytest.mark.parametrize(
    ("source", "processing", "alerted"),
    [
        (
            "dead_letter:orders",
            "dlq_bridge:processing:{dead_letter:orders}:bridge-1",
            "dlq_bridge:alerted:{dead_letter:orders}",
        ),
        (
            "dead_letter:{carts}:eu",
            "dlq_bridge:processing:dead_letter:{carts}:eu:bridge-1",
            "dlq_bridge:alerted:dead_letter:{carts}:eu",
        ),
    ],
)
def test_derived_keys_share_the_source_slot(source: str, processing: str, alerted: str) -> None:
    assert keys.processing(source, "bridge-1") == processing
    assert keys.alerted(source) == alerted


@pytest.mark.parametrize(
    "source", ["dead_letter:orders", "dead_letter:{carts}:eu", "dead_letter:a:b:c", "dead_letter:{}x"]
)
def test_processing_keys_parse_back_to_source_and_consumer(source: str) -> None:
    parsed = keys.parse_processing(keys.processing(source, "pod-7.a_b"))
    assert parsed == keys.ProcessingKey(source_key=source, consumer="pod-7.a_b")


def test_non_processing_keys_do_not_parse() -> None:
    assert keys.parse_processing("dlq_bridge:alerted:{x}") is None
    assert keys.parse_processing("dlq_bridge:processing:{x}:bad consumer") is None


@pytest.mark.parametrize("source", ["dead_letter:{}x", "dead_letter:a}b", "dead_letter:}{", "dead_letter:x{}}"])
def test_a_key_with_a_closing_brace_but_no_tag_gets_a_slot_tag_of_its_own_slot(source: str) -> None:
    """Wrapping such a key in braces would hash by the text before its `}`: another slot."""
    ref = keys.source_ref(source)
    assert ref.startswith("{dlqb~") and ref.endswith(source)
    assert key_slot(keys.alerted(source).encode()) == key_slot(source.encode())
    assert keys.parse_alerted(keys.alerted(source)) == source


def test_the_old_name_of_such_a_key_still_parses_back() -> None:
    assert keys.parse_processing("dlq_bridge:processing:{dead_letter:a}b}:c1") == keys.ProcessingKey(
        "dead_letter:a}b", "c1"
    )


def _derived(source: str) -> list[str]:
    return [
        keys.processing(source, "c-1"),
        keys.alerted(source),
        keys.outbox(source),
        keys.quarantine(source),
        keys.claims(source, "0123456789abcdef"),
        keys.redrive_staging(source),
        keys.entry_records(source),
        keys.entry_index(source),
        keys.handoff_stats(source, 29_500_000),
    ]


KEY_TEXT = (
    st.text(st.sampled_from("{}:ab\x00é"), max_size=12)
    | st.text(max_size=24)
    | st.binary(max_size=16).map(names.decode)  # not UTF-8: the bytes survive surrogateescape
)


@given(tail=KEY_TEXT)
@settings(max_examples=400, deadline=None)
def test_every_derived_key_hashes_to_the_dlq_slot_and_parses_back(tail: str) -> None:
    """Redis's own rule, as redis-py computes it (`redis.crc.key_slot`), for any key name."""
    source = names.DLQ_PREFIX + tail
    slot = key_slot(names.encode(source))
    assert keys.key_slot(names.encode(source)) == slot
    for name in _derived(source):
        assert key_slot(names.encode(name)) == slot, name
    assert keys.parse_processing(keys.processing(source, "c-1")) == keys.ProcessingKey(source, "c-1")
    assert keys.parse_alerted(keys.alerted(source)) == source
