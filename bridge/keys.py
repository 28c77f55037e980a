"""Every Redis key name the bridge uses, in one place (DESIGN section 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "dlq_bridge"
DLQ_PREFIX = "dead_letter:"
UNDELIVERABLE = f"{PREFIX}:undeliverable"
PROCESSING_MATCH = f"{PREFIX}:processing:*"
ALERTED_MATCH = f"{PREFIX}:alerted:*"
OUTBOX_MATCH = f"{PREFIX}:outbox:*"

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


def outbox(source_key: str) -> str:
    """Alerts handed off with their entry, not yet in the sink queues (hash; the source's slot)."""
    return f"{PREFIX}:outbox:{source_ref(source_key)}"


def parse_outbox(key: str) -> str | None:
    """The source key of an outbox key `dlq_bridge:outbox:<source ref>`; None otherwise."""
    head = f"{PREFIX}:outbox:"
    if not key.startswith(head) or len(key) == len(head):
        return None
    return source_from_ref(key[len(head) :])


@dataclass(frozen=True)
class SinkQueueKeys:
    """One sink's durable queue; all three keys share the `{<sink>}` slot (docs/design.md, section 5b).

    ready:  sorted set, item id -> order score (severity first, then oldest first)
    leased: sorted set, item id -> lease expiry (epoch ms)
    items:  hash, item id -> alert JSON
    """

    ready: str
    leased: str
    items: str


def sink_queue(sink: str) -> SinkQueueKeys:
    head = f"{PREFIX}:sinkq:{{{sink}}}"
    return SinkQueueKeys(ready=f"{head}:ready", leased=f"{head}:leased", items=f"{head}:items")


def heartbeat(consumer: str) -> str:
    return f"{PREFIX}:consumer:{consumer}"


def delivered(sink: str, idempotency_key: str, digest: str) -> str:
    return f"{PREFIX}:delivered:{sink}:{idempotency_key}:{digest}"


def summary(fingerprint: str) -> str:
    return f"{PREFIX}:summary:{fingerprint}"


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
