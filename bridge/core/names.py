"""Names of sources, queues and consumers: how a Redis key name is encoded, shown and routed.

Not the bridge's key names (each store owns its own, bridge/stores/): the vocabulary every layer
uses to talk about a key it was given: its exact bytes, a safe way to show it, the queue it routes to.
"""

from __future__ import annotations

import re
from typing import Any

DLQ_PREFIX = "dead_letter:"
CONSUMER_ID_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def encode(key: str) -> bytes:
    """The exact bytes of a key name decoded by `decode` (non-UTF-8 bytes survive)."""
    return key.encode("utf-8", "surrogateescape")


def decode(key: bytes | str) -> str:
    """A key name from Redis as text that `encode` turns back into the same bytes."""
    return key if isinstance(key, str) else key.decode("utf-8", "surrogateescape")


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
DISPLAY_MAX_CHARS = 512


def display(key: str) -> str:
    """A key name for logs, metrics and cards: bad bytes as `\\xff`, controls escaped, capped."""
    text = encode(key).decode("utf-8", "backslashreplace")
    text = _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if len(text) > DISPLAY_MAX_CHARS:
        text = f"{text[:DISPLAY_MAX_CHARS]}…"
    return text


def queue_of(source_key: str) -> str:
    """The route's queue of a DLQ key: the key without `dead_letter:`, and without the
    braces of a whole-name hash tag (`dead_letter:{carts}` → `carts`; docs/design.md, section 2b)."""
    queue = source_key.removeprefix(DLQ_PREFIX)
    if len(queue) > 2 and queue[0] == "{" and queue[-1] == "}" and "}" not in queue[1:-1]:
        return queue[1:-1]
    return queue


def work_queue(source_key: str) -> str | None:
    """The work queue a DLQ feeds back into: the key without `dead_letter:`; None without it."""
    if not source_key.startswith(DLQ_PREFIX) or source_key == DLQ_PREFIX:
        return None
    return source_key[len(DLQ_PREFIX) :]


def text(value: Any) -> str:
    """A Redis reply field as text: bytes decoded byte-exactly (as `decode`), anything else by `str`."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def as_bytes(value: bytes | str) -> bytes:
    """Redis replies are bytes (no decode_responses); typed as either by redis-py."""
    return value if isinstance(value, bytes) else value.encode("utf-8")
