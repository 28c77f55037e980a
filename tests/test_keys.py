from __future__ import annotations

import pytest

from bridge import keys


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


def test_empty_braces_are_not_a_hash_tag() -> None:
    assert keys.source_ref("dead_letter:{}x") == "{dead_letter:{}x}"
