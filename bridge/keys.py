"""Every Redis key name the bridge uses, in one place (DESIGN section 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "dlq_bridge"
DLQ_PREFIX = "dead_letter:"
UNDELIVERABLE = f"{PREFIX}:undeliverable"
PROCESSING_MATCH = f"{PREFIX}:processing:*"
ALERTED_MATCH = f"{PREFIX}:alerted:*"

CONSUMER_ID_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def has_hash_tag(key: str) -> bool:
    """True when Redis Cluster would hash `key` by a `{tag}` inside it."""
    start = key.find("{")
    if start < 0:
        return False
    end = key.find("}", start + 1)
    return end > start + 1


def source_ref(source_key: str) -> str:
    """`{source}` so derived keys share the source's cluster slot."""
    return source_key if has_hash_tag(source_key) else "{" + source_key + "}"


def source_from_ref(ref: str) -> str:
    """Inverse of `source_ref`: strip the outer braces of an exact `{…}` ref."""
    inner = ref[1:-1]
    if ref.startswith("{") and ref.endswith("}") and source_ref(inner) == ref:
        return inner
    return ref


def processing(source_key: str, consumer: str) -> str:
    return f"{PREFIX}:processing:{source_ref(source_key)}:{consumer}"


def alerted(source_key: str) -> str:
    return f"{PREFIX}:alerted:{source_ref(source_key)}"


def heartbeat(consumer: str) -> str:
    return f"{PREFIX}:consumer:{consumer}"


def delivered(sink: str, idempotency_key: str, digest: str) -> str:
    return f"{PREFIX}:delivered:{sink}:{idempotency_key}:{digest}"


def summary(fingerprint: str) -> str:
    return f"{PREFIX}:summary:{fingerprint}"


def quarantine(source_key: str) -> str:
    """Entries that failed processing too often, kept unparsed (docs/design.md, section 2)."""
    return f"{PREFIX}:quarantine:{source_ref(source_key)}"


def claims(source_key: str, digest: str) -> str:
    """Claim counter of one entry (by raw digest), in the source's hash slot."""
    return f"{PREFIX}:claims:{source_ref(source_key)}:{digest}"


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


@dataclass(frozen=True)
class ProcessingKey:
    """A parsed `dlq_bridge:processing:<source ref>:<consumer>` key."""

    source_key: str
    consumer: str


def parse_processing(key: str) -> ProcessingKey | None:
    """Split a processing key at its last `:`; None when it is not one."""
    head = f"{PREFIX}:processing:"
    if not key.startswith(head):
        return None
    ref, sep, consumer = key[len(head) :].rpartition(":")
    if not sep or not ref or not CONSUMER_ID_RE.match(consumer):
        return None
    return ProcessingKey(source_key=source_from_ref(ref), consumer=consumer)


def queue_of(source_key: str) -> str:
    """The queue name a DLQ key stands for: the key without `dead_letter:`."""
    return source_key.removeprefix(DLQ_PREFIX)


def route_queue(source_key: str) -> str:
    """The route's queue of a DLQ key: `queue_of`, a whole-name hash tag's braces dropped.

    `dead_letter:{carts}` → `carts`; `dead_letter:{carts}:eu` → `{carts}:eu` (docs/design.md, section 2b).
    """
    queue = queue_of(source_key)
    inner = queue[1:-1]
    if queue.startswith("{") and queue.endswith("}") and "{" not in inner and "}" not in inner and inner:
        return inner
    return queue


def parse_alerted(key: str) -> str | None:
    """The source key of an archive key `dlq_bridge:alerted:<source ref>`; None otherwise."""
    head = f"{PREFIX}:alerted:"
    if not key.startswith(head) or len(key) == len(head):
        return None
    return source_from_ref(key[len(head) :])


def work_queue(source_key: str) -> str | None:
    """The work queue a DLQ feeds back into: the key without `dead_letter:`; None without it."""
    if not source_key.startswith(DLQ_PREFIX) or source_key == DLQ_PREFIX:
        return None
    return source_key[len(DLQ_PREFIX) :]
