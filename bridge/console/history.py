"""The history of an entry: every hand-off of the same job (source and job id), who acted on each.

A job redriven and failing again is parked again with new bytes (attempts, error), so it is a
new entry with its own record. The search index (bridge.stores.search_index) keeps, per
source, one lex-ordered set of "<job id>\\0<ms>\\0<digest>" members; an entry's history is one
ZRANGEBYLEX of its job id, the records of the hand-offs found (one HMGET) and their delivery
states (what each sink did each time, one pipelined batch, as on every page). Who acted on
an entry is kept in `dlq_bridge:entries:<ref>:acted` (digest → the last ACTED_MAX actions:
who, what, when), written by the console's redrives (one entry, a group, a bulk snapshot) and
bulk discards, and dropped with the record once the hand-off trims it.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import redis.asyncio as redis
from pydantic import Field

from bridge.console.views import EntryView, View
from bridge.core import names
from bridge.stores.archive import Archive, Record
from bridge.stores.search_index import SearchIndex, acted_key, jobs_key, member_ms, record_act

__all__ = ["Acted", "HistoryItem", "history", "record_act"]

HISTORY_MAX = 50


class Acted(View):
    who: str
    action: str
    at: float


class HistoryItem(View):
    """One hand-off of the job, newest first."""

    entry: EntryView = Field(description="The hand-off: when, attempts, error, where each alert went.")
    acted: list[Acted] = Field(description="Who acted on it from the console, oldest first.")


class EntryReader(Protocol):
    """What a history reads through (the console service): records, the index, entry views."""

    search_index: SearchIndex

    async def record(self, source: str, entry_id: str) -> Record | None: ...

    async def views_of(self, items: list[tuple[str, str, bytes | None, Any]]) -> list[EntryView]: ...


async def history(service: EntryReader, client: redis.Redis, source: str, entry_id: str) -> list[HistoryItem]:
    """Every hand-off of the entry's job in `source`, newest first (at most HISTORY_MAX); [] when unknown."""
    record = await service.record(source, entry_id)
    if record is None:
        return []
    await service.search_index.refresh([source])
    job_id = record.alert.dead_letter.job_id
    digests = [entry_id]
    if job_id:
        prefix = job_id[:200].encode("utf-8", "surrogateescape") + b"\0"
        members = await client.zrangebylex(jobs_key(source), b"[" + prefix, b"[" + prefix + b"\xff")
        ordered = sorted(members, key=member_ms, reverse=True)[:HISTORY_MAX]
        digests = list(dict.fromkeys([_digest(m) for m in ordered] + [entry_id]))
    stored = await Archive(client).records(source, digests)
    found = [(d, s) for d, s in zip(digests, stored, strict=True) if s is not None]
    views = await service.views_of([(source, d, None, s) for d, s in found])
    acts = await client.hmget(acted_key(source), [d for d, _s in found]) if found else []
    items = [HistoryItem(entry=v, acted=_acted(a)) for v, a in zip(views, acts, strict=True)]
    return sorted(items, key=lambda i: i.entry.archived_at or 0.0, reverse=True)


def _acted(raw: Any) -> list[Acted]:
    try:
        return [Acted.model_validate(a) for a in json.loads(raw)] if raw else []
    except (ValueError, TypeError):
        return []


def _digest(member: Any) -> str:
    return names.text(member).rsplit("\0", 1)[-1]
