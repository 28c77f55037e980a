"""Every Redis key name the bridge uses, in one place (docs/design.md, section 2).

Each structure is read and written by its store in `bridge/stores/`, which takes its key names from
here (claim bookkeeping: `bridge.stores.claims`); modules outside `bridge/stores/` go through the store.
"""

from __future__ import annotations

import binascii
import functools
from dataclasses import dataclass

from bridge.core.names import CONSUMER_ID_RE, encode

PREFIX = "dlq_bridge"
UNDELIVERABLE = f"{PREFIX}:undeliverable"
PROCESSING_MATCH = f"{PREFIX}:processing:*"
ALERTED_MATCH = f"{PREFIX}:alerted:*"
OUTBOX_MATCH = f"{PREFIX}:outbox:*"
QUARANTINE_MATCH = f"{PREFIX}:quarantine:*"
SEARCH_INDEXED = f"{PREFIX}:search:indexed"  # SET: the sources the console's search index covers



def has_hash_tag(key: str) -> bool:
    """True when Redis Cluster would hash `key` by a `{tag}` inside it."""
    start = key.find("{")
    if start < 0:
        return False
    end = key.find("}", start + 1)
    return end > start + 1


SLOT_TAG_HEAD = "dlqb~"  # a slot tag: `{dlqb~<slot>~<n>}` (see `source_ref`)


def source_ref(source_key: str) -> str:
    """A name for derived keys that Redis Cluster hashes to the source's own slot.

    Redis hashes a key by its tag: the text between the first `{` and the first `}` after
    it, when that is not empty; else by the whole key. So:
    - a key with a tag is its own ref (`dead_letter:{carts}:eu`);
    - a key without `}` becomes `{<key>}`: the tag is the whole key;
    - a key holding a `}` but no tag (`dead_letter:a}b`, `dead_letter:{}x`) cannot be
      wrapped (the tag would stop at its `}`): its ref is `{dlqb~<slot>~<n>}<key>`, a tag
      chosen to hash to the key's slot, followed by the key itself.
    """
    if has_hash_tag(source_key):
        return source_key
    if "}" not in source_key:
        return "{" + source_key + "}"
    return "{" + slot_tag(key_slot(encode(source_key))) + "}" + source_key


def source_from_ref(ref: str) -> str:
    """Inverse of `source_ref`: strip a slot tag, or the outer braces of an exact `{…}` ref."""
    if ref.startswith("{" + SLOT_TAG_HEAD):
        end = ref.find("}")
        if end > 0 and source_ref(ref[end + 1 :]) == ref:
            return ref[end + 1 :]
    inner = ref[1:-1]
    # `{a}b}` is also read as `a}b`: the name such keys had before slot tags existed.
    if ref.startswith("{") and ref.endswith("}") and not has_hash_tag(inner):
        return inner
    return ref


def key_slot(key: bytes) -> int:
    """The Redis Cluster slot of a key name (CRC16 of its tag, or of the whole name, mod 16384)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return binascii.crc_hqx(key, 0) % 16384


@functools.lru_cache(maxsize=4096)
def slot_tag(slot: int) -> str:
    """The first `dlqb~<slot>~<n>` (n = 0, 1, …) that hashes to `slot` (about 16,384 tries)."""
    head = f"{SLOT_TAG_HEAD}{slot}~"
    n = 0
    while binascii.crc_hqx(f"{head}{n}".encode(), 0) % 16384 != slot:
        n += 1
    return f"{head}{n}"


def processing(source_key: str, consumer: str) -> str:
    return f"{PREFIX}:processing:{source_ref(source_key)}:{consumer}"


def inflight(source_name: str, consumer: str) -> str:
    """A kind record's raw bytes while this consumer holds it (list; the source's slot; docs/design.md, 2b)."""
    return f"{PREFIX}:inflight:{source_ref(source_name)}:{consumer}"


def alerted(source_key: str) -> str:
    return f"{PREFIX}:alerted:{source_ref(source_key)}"


def outbox(source_key: str) -> str:
    """Alerts handed off with their entry, not yet in the sink queues (hash; the source's slot)."""
    return f"{PREFIX}:outbox:{source_ref(source_key)}"


@dataclass(frozen=True)
class SinkQueueKeys:
    """One sink's durable queue; all three keys share the `{<sink>}` slot (docs/design.md, section 5b).

    ready:  sorted set, item id -> order score (severity first, then oldest first)
    leased: sorted set, item id -> lease expiry (epoch ms)
    items:  hash, item id -> alert JSON
    newer:  sorted set, item id -> record format, for items of a format newer than the replica
            that took them reads: left for a replica that reads it (bridge.core.formats)
    """

    ready: str
    leased: str
    items: str
    newer: str


def sink_queue(sink: str) -> SinkQueueKeys:
    head = f"{PREFIX}:sinkq:{{{sink}}}"
    return SinkQueueKeys(ready=f"{head}:ready", leased=f"{head}:leased", items=f"{head}:items", newer=f"{head}:newer")


SINK_QUEUE_ITEMS_MATCH = f"{PREFIX}:sinkq:{{*}}:items"


def sink_of_queue_items(key: str) -> str | None:
    """The sink whose queue `items` hash `key` is; None for any other key."""
    head, tail = f"{PREFIX}:sinkq:{{", "}:items"
    if not (key.startswith(head) and key.endswith(tail)) or len(key) <= len(head) + len(tail):
        return None
    return key[len(head):-len(tail)]


def heartbeat(consumer: str) -> str:
    return f"{PREFIX}:consumer:{consumer}"


HEARTBEAT_MATCH = f"{PREFIX}:consumer:*"


def consumer_of_heartbeat(key: str) -> str | None:
    """The consumer whose heartbeat `key` is; None for any other key."""
    head = f"{PREFIX}:consumer:"
    consumer = key[len(head):] if key.startswith(head) else ""
    return consumer if CONSUMER_ID_RE.match(consumer) else None


def delivered(sink: str, idempotency_key: str, digest: str) -> str:
    """The delivery ledger of one (sink, alert): in the `{<sink>}` slot of the sink's queue, so
    taking an item can reserve it and acking it can mark it in the same script."""
    return f"{delivered_prefix(sink)}{idempotency_key}:{digest}"


def delivered_prefix(sink: str) -> str:
    return f"{PREFIX}:delivered:{{{sink}}}:"


def summary(fingerprint: str) -> str:
    """The cached summary of a cause; `{<fingerprint>}`: the slot of its lead (one script reads both)."""
    return f"{PREFIX}:summary:{{{fingerprint}}}"


def summary_lead(fingerprint: str) -> str:
    """Which replica is asking the gateway about `fingerprint` right now (fleet-wide single flight)."""
    return f"{PREFIX}:summary-lead:{{{fingerprint}}}"


def limit(receiver_ref: str) -> str:
    """The fleet-wide rate limit of one receiver; `receiver_ref` is a hash, never a secret."""
    return f"{PREFIX}:limit:{{{receiver_ref}}}"


def gateway_breaker(gateway_ref: str) -> str:
    """The fleet-wide circuit breaker hash of one gateway (shares a slot with its budget)."""
    return f"{PREFIX}:gateway:{{{gateway_ref}}}:breaker"


def gateway_calls(gateway_ref: str) -> str:
    """The fleet-wide calls-per-minute log (a sorted set) of one gateway."""
    return f"{PREFIX}:gateway:{{{gateway_ref}}}:calls"


def quarantine(source_key: str) -> str:
    """Entries that failed processing too often, kept unparsed (docs/design.md, section 2)."""
    return f"{PREFIX}:quarantine:{source_ref(source_key)}"


def redrive_staging(source_key: str) -> str:
    """Entries `redrive` is moving to a work queue in another cluster slot (list, the DLQ's slot)."""
    return f"{PREFIX}:redrive:{source_ref(source_key)}"


def claims(source_key: str, digest: str) -> str:
    """Suspect mark of one entry (by raw digest), in the source's hash slot: present once the entry
    was held by a consumer that died; its value counts the deaths while it ran alone (docs/design.md,
    section 3b)."""
    return f"{PREFIX}:claims:{source_ref(source_key)}:{digest}"


def solo(consumer: str) -> str:
    """The suspect a consumer is running alone right now: `<digest><source key>` (docs/design.md, 3b)."""
    return f"{PREFIX}:solo:{consumer}"


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


def parse_alerted(key: str) -> str | None:
    """The source key of an archive key `dlq_bridge:alerted:<source ref>`; None otherwise."""
    head = f"{PREFIX}:alerted:"
    if not key.startswith(head) or len(key) == len(head):
        return None
    return source_from_ref(key[len(head) :])


# --- Other DLQ kinds (docs/design.md, section 2b) -------------------------------------------
# The producers' own keys (read only, never written) and the bridge's cursor for watched stores.
# A cursor is named by the source's configured name and hash-tagged by it: one slot per source.


def cursor(source_name: str) -> str:
    """Hash: `score` = the highest score finished (the watermark)."""
    return f"{PREFIX}:cursor:{{{source_name}}}"


def cursor_ids(source_name: str) -> str:
    """Set: the ids finished at exactly the watermark score."""
    return f"{PREFIX}:cursor:{{{source_name}}}:ids"


def cursor_leases(source_name: str) -> str:
    """Sorted set: id → lease expiry (epoch ms) of records claimed, not yet finished."""
    return f"{PREFIX}:cursor:{{{source_name}}}:leases"


def cursor_lease_scores(source_name: str) -> str:
    """Hash: id → the record's score in the watched store, for reclaiming an expired lease."""
    return f"{PREFIX}:cursor:{{{source_name}}}:lease_scores"


def cursor_held(source_name: str) -> str:
    """Sorted set: id → score in the store of jobs alerted to a resolving sink and not yet seen leaving."""
    return f"{PREFIX}:cursor:{{{source_name}}}:held"


def cursor_held_notes(source_name: str) -> str:
    """Hash: id → what resolves that job's alert when it leaves the store (`bridge.sources.leaving`)."""
    return f"{PREFIX}:cursor:{{{source_name}}}:held_notes"


def leave_outbox(source_name: str) -> str:
    """The outbox of resolves for jobs that left a watched store, in the cursor's slot (`outbox` shape)."""
    return f"{PREFIX}:outbox:{{{source_name}}}"


# Grouping (docs/design.md, section 5b): every key of one sink's groups carries
# the `{<sink>}` hash tag, so a group's keys, the sink's due index and the
# sink's delivery queue share one cluster slot. Sink names are `[A-Za-z0-9._-]+`,
# so the first `{…}` in these keys is always the sink's.


def groups_due(sink: str) -> str:
    """ZSET group key → epoch seconds when the group is next due (or its lease ends)."""
    return f"{PREFIX}:groups:{{{sink}}}:due"


def _group_part(part: str, sink: str, group_key: str, previous: bool) -> str:
    # The group key (which may hold any queue name) is always the tail, after a
    # fixed part name, so no group's key can equal another group's.
    return f"{PREFIX}:group:{{{sink}}}:{'prev-' if previous else ''}{part}:{group_key}"


def group(sink: str, group_key: str, previous: bool = False) -> str:
    """HASH: the group's counters, timers, lease and first alert.

    `previous=True`: the same cause's last closed group, kept when a new one opens.
    """
    return _group_part("state", sink, group_key, previous)


def group_jobs(sink: str, group_key: str, previous: bool = False) -> str:
    """ZSET member idempotency key → arrival number (1, 2, …): membership and order."""
    return _group_part("jobs", sink, group_key, previous)


def group_job_details(sink: str, group_key: str, previous: bool = False) -> str:
    """HASH member idempotency key → compact JSON of that job (for digests and webhooks)."""
    return _group_part("job", sink, group_key, previous)


def group_queues(sink: str, group_key: str, previous: bool = False) -> str:
    """HASH queue → number of the group's jobs from that queue."""
    return _group_part("queues", sink, group_key, previous)


def group_facets(sink: str, group_key: str, previous: bool = False) -> str:
    """HASH `j:<job name>` / `k:<kind>` → jobs; `f:<queue>` / `l:<queue>` → first / last seen there."""
    return _group_part("facets", sink, group_key, previous)


def group_gone(sink: str, group_key: str, previous: bool = False) -> str:
    """SET of the group's members redriven or gone from their store (all gone: its incident resolves)."""
    return _group_part("gone", sink, group_key, previous)


# --- Console (docs/design.md, section "Console and JSON API") -------------------------------
# Entry records and hand-off counts live in the source's slot (written by the hand-off script);
# silences and the audit list are small fleet-wide keys read off the hot path.
SILENCES = f"{PREFIX}:silences"
AUDIT = f"{PREFIX}:audit"
STATS_BUCKET_S = 60


def entry_records(source_key: str) -> str:
    """HASH raw digest → JSON record of the entry's hand-off (alert, sinks, silenced sinks, ms)."""
    return f"{PREFIX}:entries:{source_ref(source_key)}"


def entry_index(source_key: str) -> str:
    """ZSET raw digest → hand-off ms; trimmed with the records to `sources.archive_max`."""
    return f"{PREFIX}:entries:{source_ref(source_key)}:index"


def trend_hour(hour: int) -> str:
    """HASH of one hour's hand-offs (epoch hour): `all`, `q:<queue>`, `c:<cause fingerprint>` → count."""
    return f"{PREFIX}:trends:h:{hour}"


def trend_day(day: int) -> str:
    """HASH of one UTC day's hand-offs (epoch day), fields as `trend_hour`."""
    return f"{PREFIX}:trends:d:{day}"


def handoff_stats(source_key: str, minute: int) -> str:
    """HASH of one minute's hand-offs (`alerted`, and per summary source); expires after 2 h."""
    return f"{PREFIX}:stats:{source_ref(source_key)}:{minute}"


def seen_before(cause: str) -> str:
    """HASH: one cause's history (bridge.stores.seen_before), bounded and expiring."""
    return f"{PREFIX}:seen:{cause}"
