"""Archived entries as the console shows them: the hand-off's record, the envelope, and where the alert went.

The hand-off writes one record per entry (`dlq_bridge:entries:<ref>`, see
bridge.stores.handoff) holding the alert, the sinks it was handed to, the silenced
sinks and the time. Where each alert went is read, never stored twice:

    silenced       the record says a silence held it back
    delivered      the sink's ledger mark (its time) is at or after the hand-off
    duplicate      the ledger mark is older than the hand-off (an earlier copy was delivered)
    undeliverable  a record in `dlq_bridge:undeliverable` for (sink, idempotency key, digest)
    pending        still in the sink's queue, or a send holds the ledger reservation
    grouped        in an open group whose notifications do not cover it yet
    unknown        none of these any more (the ledger mark expired after its TTL)

A grouped member counts as delivered once a group notification covered it.
Every lookup of one page goes out in one pipelined batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

from bridge.console.views import DeliveryState, EnvelopeView, Link, SinkDelivery, SummaryView
from bridge.core.models import Alert, DeadLetter
from bridge.settings import SinkSettings
from bridge.sinks.sink_registry import SINKS
from bridge.stores.archive import Record
from bridge.stores.groups import GroupReader, group_key
from bridge.stores.ledger import SENDING, Ledger
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.undeliverable_records import UndeliverableStore

__all__ = ["DeliveryReader", "Record", "envelope_view", "runbook_link", "summary_view"]

UNDELIVERABLE_SCAN = 2000
DUPLICATE_SLACK_MS = 1000  # a mark this much before the hand-off is still this hand-off's (clock skew)
LOOKUPS_PER_SINK = 6  # ledger mark, queued item, group member and fields (open group, then closed one)


@dataclass(frozen=True)
class Undelivered:
    at: float | None
    error: str


def undelivered_key(sink: str, idempotency_key: str, digest: str) -> tuple[str, str, str]:
    return (sink, idempotency_key, digest)


async def undelivered_index(client: redis.Redis) -> dict[tuple[str, str, str], Undelivered]:
    """(sink, idempotency key, digest) → the newest undeliverable record of it (the newest records only)."""
    found: dict[tuple[str, str, str], Undelivered] = {}
    for stored in await UndeliverableStore(client).records(UNDELIVERABLE_SCAN):
        rec = stored.record
        try:
            key = undelivered_key(str(rec["sink"]), str(rec["idempotency_key"]), str(rec["raw_digest"]))
        except (ValueError, KeyError, TypeError):
            continue
        at = rec.get("at")
        found.setdefault(key, Undelivered(float(at) if isinstance(at, (int, float)) else None,
                                          str(rec.get("error", ""))))
    return found


def envelope_view(letter: DeadLetter) -> EnvelopeView:
    """The envelope as the console shows it; the trace context only when it is valid (checked again)."""
    trace = letter.trace
    fields = letter.model_dump() | {"traceparent": trace.traceparent if trace else None}
    return EnvelopeView.model_validate(fields | {"trace_id": trace.trace_id if trace else None})


def redrive_helps(envelope: EnvelopeView) -> bool:
    """False for an unreadable entry (not UTF-8, not JSON, not an object): a worker would fail on the same
    bytes again, so the console offers no Redrive. An oversized one (`sources.max_parse_bytes`) is a
    readable job the bridge chose not to parse: it may be redriven."""
    return envelope.parse_error is None or envelope.parse_error.startswith("oversized")


def summary_view(alert: Alert, runbook_base: str | None) -> SummaryView:
    s = alert.summary
    return SummaryView(title=s.title, severity=s.severity, likely_cause=s.likely_cause, next_steps=list(s.next_steps),
                       runbook_hint=s.runbook_hint, runbook=runbook_link(alert, runbook_base), source=s.source,
                       fallback_reason=s.fallback_reason, repairs=list(s.repairs))


def runbook_link(alert: Alert, base: str | None) -> Link | None:
    """The bridge's own runbook URL is a live link only when it lies under `runbooks.base_url`."""
    url = alert.runbook_url
    if not url:
        return None
    clickable = base is not None and url.startswith(base.rstrip("/") + "/") and url.startswith(("https://", "http://"))
    return Link(text=alert.summary.runbook_hint or url, url=url, clickable=clickable)


class DeliveryReader:
    """Per-sink delivery states of a batch of records (see module doc)."""

    def __init__(self, client: redis.Redis, sinks: Sequence[SinkSettings]) -> None:
        self._redis = client
        self._sinks = {s.name: s for s in sinks}
        self._groups = {s.name: GroupReader(client, s.name) for s in sinks}

    async def states(self, records: Sequence[Record]) -> list[list[SinkDelivery]]:
        lookups = [(rec, sink) for rec in records for sink in rec.sinks]
        async with self._redis.pipeline(transaction=False) as pipe:
            counts = [self._queue_lookups(pipe, rec, sink) for rec, sink in lookups]
            replies = await pipe.execute() if lookups else []
        failed = await undelivered_index(self._redis) if lookups else {}
        per_sink = iter(_padded_chunks(replies, counts, LOOKUPS_PER_SINK))
        out = []
        for rec in records:
            found = [self._state(rec, sink, next(per_sink), failed) for sink in rec.sinks]
            silenced = [SinkDelivery(sink=s, state="silenced", at=rec.ms / 1000, silence_id=sid)
                        for s, sid in rec.silenced.items()]
            out.append(found + silenced)
        return out

    def _queue_lookups(self, pipe: Any, rec: Record, sink: str) -> int:
        """Queue one record's lookups for `sink` on `pipe`; returns how many (2, or 6 when grouped)."""
        alert = rec.alert
        Ledger.queue_mark(pipe, sink, alert)
        SinkQueue.queue_holds(pipe, sink, rec.item)
        group = self._group_of(rec, sink)
        if group is None:
            return 2
        self._groups[sink].queue_member(pipe, group, alert.idempotency_key)
        return LOOKUPS_PER_SINK

    def _group_of(self, rec: Record, sink: str) -> str | None:
        settings = self._sinks.get(sink)
        if settings is None or settings.group_by == "none":
            return None
        return group_key(rec.alert, settings.group_by)

    def _state(
        self, rec: Record, sink: str, reply: list[Any], failed: Mapping[tuple[str, str, str], Undelivered]
    ) -> SinkDelivery:
        mark, queued, member, group, prev_member, prev_group = reply
        alert = rec.alert
        group_name = self._group_of(rec, sink)
        base = {"sink": sink, "group_key": group_name}
        state = _ledger_state(mark, rec.ms)
        if state is not None:
            return SinkDelivery(**base, state=state[0], at=state[1], detail=state[2])
        miss = failed.get(undelivered_key(sink, alert.idempotency_key, alert.dead_letter.raw_digest))
        if miss is not None:
            return SinkDelivery(**base, state="undeliverable", at=miss.at, detail=miss.error)
        if queued:
            return SinkDelivery(**base, state="pending", detail="queued for the sink")
        for arrival, fields, closed in ((member, group, False), (prev_member, prev_group, True)):
            if arrival is not None and isinstance(fields, list):
                return _group_state(base, float(arrival), fields, closed)
        settings = self._sinks.get(sink)
        if settings is not None and not SINKS.of(settings).ledger:
            return SinkDelivery(**base, state="delivered", detail=f"sent (the {settings.type} sink keeps no ledger)")
        return SinkDelivery(**base, state="unknown", detail="no trace left (the ledger mark expires after its TTL)")


def _ledger_state(mark: Any, handed_ms: int) -> tuple[DeliveryState, float | None, str] | None:
    if mark is None:
        return None
    text = mark.decode(errors="replace") if isinstance(mark, bytes) else str(mark)
    if text.startswith(SENDING):
        return "pending", None, "being sent"
    try:
        at = float(json.loads(text)["at"])
    except (ValueError, KeyError, TypeError):
        return "delivered", None, ""
    if at * 1000 < handed_ms - DUPLICATE_SLACK_MS:
        return "duplicate", at, "already delivered before this hand-off"
    return "delivered", at, ""


def _group_state(base: dict[str, Any], arrival: float, fields: list[Any], closed: bool) -> SinkDelivery:
    notified = int(fields[0] or 0)
    previous_at = float(fields[1]) if fields[1] else None
    if closed or arrival <= notified:
        return SinkDelivery(**base, state="delivered", at=previous_at, detail="in a group notification")
    return SinkDelivery(**base, state="grouped", detail="waiting for the group's next notification")


def _padded_chunks(items: Sequence[Any], counts: Sequence[int], size: int) -> list[list[Any]]:
    """`items` cut into runs of `counts`, each padded with None to `size`.

    (No placeholder commands in the pipeline: a cluster pipeline refuses ECHO.)
    """
    out, start = [], 0
    for count in counts:
        out.append([*items[start : start + count], *([None] * (size - count))])
        start += count
    return out
