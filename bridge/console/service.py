"""The console's read side: every page and `/api/v1` GET reads through `ConsoleService`.

Built once with the settings, the bridge's Redis client and what the runtime
already has (the list source's tracked DLQs, the kind sources, health); no
globals. Each method returns a view from `bridge.console.views`:

    overview()                        -> Overview
    sources()                         -> list[SourceView]
    source_entries(source, offset, limit) -> EntryPage     newest first, paged by offset
    entry(source, entry_id)           -> EntryView | None   entry_id = raw digest (16 hex)
    groups()                          -> list[GroupSummaryView]
    group(sink, group_key)            -> GroupView | None
    undeliverable(limit)              -> list[UndeliverableView]
    silences(include_expired)         -> list[SilenceView]
    audit(limit)                      -> list[AuditRecord]
    search(filter)                    -> SearchPage          every source, newest first (bridge.console.search)
    history(source, entry_id)         -> list[HistoryItem]   every hand-off of its job (bridge.console.history)

Actions live in `bridge.console.actions.ConsoleActions`. Data comes from the
stores the pipeline keeps (archive, entry records, sink queues, ledger,
undeliverable list, groups, gateway gate, silences, audit list); nothing here
writes to Redis. See docs/design.md, section "Console and JSON API".
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

from bridge.clients.redis_memory import read_memory
from bridge.console.entries import DeliveryReader, envelope_view, redrive_helps, summary_view
from bridge.console.fleet import gateway_view, group_summaries, group_view, sink_views
from bridge.console.history import HistoryItem, history
from bridge.console.search import Searcher, SearchFilter, SearchPage
from bridge.console.silence_views import silence_view
from bridge.console.views import (
    EntryPage,
    EntryView,
    GroupSummaryView,
    GroupView,
    MemoryPlanView,
    Overview,
    RetentionNote,
    SilenceView,
    SourceView,
    SummarySourceCounts,
    UndeliverableView,
)
from bridge.core import names
from bridge.core.claimed import entry_digest
from bridge.core.health import Health
from bridge.intake.chain import normalize
from bridge.settings import Settings, SinkSettings
from bridge.sources.kinds import KindReader
from bridge.sources.watched import WatchedSource
from bridge.stores import footprint
from bridge.stores.archive import STATS_BUCKET_S, Archive, Record, minute_of
from bridge.stores.audit import AuditLog, AuditRecord
from bridge.stores.search_index import SearchIndex
from bridge.stores.silences import SilenceStore
from bridge.stores.trends import TrendStore
from bridge.stores.undeliverable_records import Stored, UndeliverableStore, retryable

PAGE_MAX = 200
HOUR_BUCKETS = 3600 // STATS_BUCKET_S
ARCHIVE_SCAN_EVERY_S = 30.0
KIND_DEPTH_TIMEOUT_S = 1.0
UNDELIVERABLE_COUNTED = 2000
LATEST = 50  # the overview's "failing now": the newest entries, grouped by cause (bridge.console.causes)
log = logging.getLogger(__name__)
NEAR_CAP = 0.9  # a store this full shows in the overview's retention banner
SCAN_COUNT = 10_000  # the search index adds keys per facet value: fewer SCAN round trips


@dataclass(frozen=True)
class KindRef:
    """A configured kind source as the runtime built it."""

    kind: str
    source: KindReader


class ConsoleService:
    """Read-only views over the bridge's Redis state (see module doc)."""

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        *,
        list_sources: Callable[[], Sequence[str]] = lambda: (),
        kinds: Sequence[KindRef] = (),
        health: Health | None = None,
        read_only: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._redis = client
        self._list_sources = list_sources
        self._kinds = {ref.source.name: ref for ref in kinds}
        self._health, self.read_only = health, read_only
        self._clock = clock
        self._sinks = settings.effective_sinks()
        self._deliveries = DeliveryReader(client, self._sinks)
        self._archived: tuple[float, set[str]] | None = None
        self.search_index, self.archive = SearchIndex(client), Archive(client)
        self.trends = TrendStore(client)  # the charts' series (bridge.stores.trends)
        self._undeliverable = UndeliverableStore(client)

    @property
    def sinks(self) -> list[SinkSettings]:
        return list(self._sinks)

    @property
    def archive_max(self) -> int:
        return self._settings.sources.archive_max

    def is_kind(self, source: str) -> bool:
        return source in self._kinds

    # --- overview -------------------------------------------------------------------------

    async def overview(self) -> Overview:
        """Counts, sinks and gateway; the open groups newest first; the latest entries of every source."""
        sources = await self.sources()
        records = await self._undeliverable.records(UNDELIVERABLE_COUNTED)
        per_sink = Counter(str(r.record.get("sink", "")) for r in records)
        silences = await SilenceStore(self._redis, self._clock).all()
        now = self._clock()
        sinks = await sink_views(self._redis, self._sinks, self._health, per_sink)
        return Overview(
            generated_at=now,
            sources=sources,
            groups=await self.groups(),
            sinks=sinks,
            gateway=await gateway_view(self._redis, self._settings.openclaw, _total(sources), self.trends, now),
            undeliverable=await self._undeliverable.depth(),
            active_silences=sum(1 for s in silences if s.active(now)),
            read_only=self.read_only,
            latest=(await self.search(SearchFilter(limit=LATEST))).entries,
            retention=self._retention(sources, await self._undeliverable.depth())
            + await self._store_retention(),
            memory_plan=await self._memory_plan(sources, max((s.open_groups for s in sinks), default=0)),
        )

    async def _memory_plan(self, sources: Sequence[SourceView], open_groups: int) -> MemoryPlanView | None:
        """The memory model for the last hour's hand-offs and these settings, against maxmemory."""
        try:
            nodes = await read_memory(self._redis)
        except Exception as exc:  # a managed Redis may refuse both CONFIG and INFO: no plan shown
            log.debug("redis memory not read (%s)", type(exc).__name__)
            return None
        per_day = 24.0 * sum(s.alerted_last_hour for s in sources)
        parts = footprint.plan(per_day, len(sources), self._settings.retention(), open_groups)
        need, largest = footprint.total(parts), max(parts, key=lambda p: p.bytes)
        limit = sum(n.maxmemory for n in nodes) if nodes and all(n.maxmemory for n in nodes) else 0
        return MemoryPlanView(per_second=per_day / footprint.DAY_S, days=footprint.PLAN_DAYS,
                              projected_bytes=int(need), largest=f"{largest.name} ({largest.bound})",
                              maxmemory_bytes=limit, warn=bool(limit) and need > footprint.PLAN_SHARE * limit,
                              share=footprint.PLAN_SHARE)

    def _retention(self, sources: Sequence[SourceView], undeliverable: int) -> list[RetentionNote]:
        """Stores at NEAR_CAP of their cap or more, with the setting that controls each."""
        archive_max = self._settings.sources.archive_max
        found = [RetentionNote(store=f"archive of {s.source}", count=s.archived, cap=archive_max,
                               setting="[sources] archive_max", trimmed_last_hour=s.trimmed_last_hour)
                 for s in sources if s.archived >= NEAR_CAP * archive_max or s.trimmed_last_hour]
        cap = self._settings.delivery.undeliverable_max
        if undeliverable >= NEAR_CAP * cap:
            found.append(RetentionNote(store="undeliverable list", count=undeliverable, cap=cap,
                                       setting="[delivery] undeliverable_max"))
        return found

    async def _store_retention(self) -> list[RetentionNote]:
        """Job-system sets near the cap their own job system trims them at (a Sidekiq dead set at
        `dead_max_jobs`, a BullMQ failed set at its jobs' `removeOnFail`, a Dramatiq dead-letter queue
        whose oldest message nears `dead_message_ttl`); unreadable stores are skipped."""
        found = []
        for name, ref in self._kinds.items():
            if not isinstance(ref.source, WatchedSource):
                continue
            try:
                fills = await asyncio.wait_for(ref.source.fills(), KIND_DEPTH_TIMEOUT_S)
            except Exception as exc:  # any client library: the sources table already shows it unreadable
                log.debug("retention of %s not read (%s)", name, type(exc).__name__)
                continue
            found += [RetentionNote(store=f"{ref.kind} set {fill.store} ({name})", count=fill.count,
                                    cap=fill.cap.limit, setting=fill.cap.setting, unit=fill.cap.unit)
                      for fill in fills if fill.cap and fill.count >= NEAR_CAP * fill.cap.limit]
        return found

    async def sources(self) -> list[SourceView]:
        """Every list source (tracked DLQs and archives) and every kind source, by name."""
        lists = sorted((set(self._list_sources()) | await self._archived_sources()) - set(self._kinds))
        source_names = lists + sorted(self._kinds)
        minute = minute_of(self._clock())
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in source_names:
                # a kind's depth comes from its reader; its first LLEN only keeps the step
                self.archive.queue_depths(pipe, name, dlq_depth=name in lists)
                self.archive.queue_stats(pipe, name, range(minute - HOUR_BUCKETS + 1, minute + 1))
            replies = await pipe.execute() if source_names else []
        step = 2 + HOUR_BUCKETS
        kind_depths = dict(zip(self._kinds, await asyncio.gather(
            *(_kind_depth(ref.source) for ref in self._kinds.values())), strict=True))
        views = []
        for i, name in enumerate(source_names):
            depth, archived, *buckets = replies[i * step : (i + 1) * step]
            views.append(self._source_view(name, kind_depths.get(name, int(depth)), int(archived), buckets))
        return views

    def _source_view(self, name: str, depth: int | None, archived: int, buckets: list[Any]) -> SourceView:
        counts: Counter[str] = Counter()
        for bucket in buckets:
            counts.update({names.text(k): int(v) for k, v in bucket.items()})
        summaries = SummarySourceCounts(openclaw=counts["openclaw"], cache=counts["cache"],
                                        fallback=counts["fallback"])
        ref = self._kinds.get(name)
        if ref is not None:
            return SourceView(source=name, kind=ref.kind, queue=name, depth=depth,
                              archived=archived, alerted_last_hour=counts["alerted"],
                              trimmed_last_hour=counts["trimmed"], summaries_last_hour=summaries, redrivable=False)
        shown = names.display(name)
        return SourceView(source=shown, kind="list", queue=names.queue_of(shown), depth=depth, archived=archived,
                          alerted_last_hour=counts["alerted"], trimmed_last_hour=counts["trimmed"],
                          summaries_last_hour=summaries, redrivable=names.work_queue(name) is not None)

    async def _archived_sources(self) -> set[str]:
        """Sources with an archive (found by SCAN at most every ARCHIVE_SCAN_EVERY_S)."""
        now = time.monotonic()
        if self._archived is not None and now - self._archived[0] < ARCHIVE_SCAN_EVERY_S:
            return self._archived[1]
        found = await self.archive.archived_sources(SCAN_COUNT)
        self._archived = (now, found)
        return found

    # --- entries --------------------------------------------------------------------------

    async def source_entries(self, source: str, offset: int = 0, limit: int = 50) -> EntryPage:
        """The archive of `source`, newest first, `limit` (≤ PAGE_MAX) entries from `offset`."""
        offset, limit = max(offset, 0), min(max(limit, 1), PAGE_MAX)
        total, found = await self.archive.page(source, offset, limit)
        raws = [_bytes(r) for r in found]
        digests = [entry_digest(r) for r in raws]
        stored = await self.archive.records(source, digests) if digests else []
        entries = await self._views(source, [(d, r, s) for d, r, s in zip(digests, raws, stored, strict=True)])
        end = offset + len(raws)
        return EntryPage(source=source, offset=offset, limit=limit, total=int(total), entries=entries,
                         next_offset=end if end < int(total) else None)

    async def entry(self, source: str, entry_id: str) -> EntryView | None:
        """One entry by its id (raw digest): from its record, else from the archived bytes."""
        stored = await self.archive.record(source, entry_id)
        raw = await self.find_raw(source, entry_id)
        if stored is None and raw is None:
            return None
        views = await self._views(source, [(entry_id, raw, stored)])
        return views[0]

    async def find_raw(self, source: str, entry_id: str) -> bytes | None:
        return (await self.find_raws(source, [entry_id])).get(entry_id)

    async def history(self, source: str, entry_id: str) -> list[HistoryItem]:
        """Every hand-off of the entry's job in `source`, newest first, with who acted (bridge.console.history)."""
        return await history(self, self._redis, source, entry_id)

    async def find_raws(self, source: str, entry_ids: Collection[str]) -> dict[str, bytes]:
        """`find_raw` of many entries of one archive, in one pass over it."""
        return await self.archive.find_raws(source, entry_ids, self._settings.sources.archive_max)

    async def record(self, source: str, entry_id: str) -> Record | None:
        return Record.parse(await self.archive.record(source, entry_id))

    async def _views(self, source: str, items: list[tuple[str, bytes | None, Any]]) -> list[EntryView]:
        return await self.views_of([(source, digest, raw, stored) for digest, raw, stored in items])

    async def views_of(self, items: list[tuple[str, str, bytes | None, Any]]) -> list[EntryView]:
        """Views of (source, digest, raw, stored record) items, their delivery states read in one batch."""
        records = [Record.parse(stored) for _src, _d, _r, stored in items]
        known = [r for r in records if r is not None]
        states = iter(await self._deliveries.states(known))
        views = []
        for (source, digest, raw, _s), record in zip(items, records, strict=True):
            deliveries = next(states) if record is not None else []
            views.append(self._entry_view(source, digest, raw, record, deliveries))
        return views

    def _entry_view(
        self, source: str, digest: str, raw: bytes | None, record: Record | None, deliveries: list[Any]
    ) -> EntryView:
        base = self._settings.runbooks.base_url
        alert = record.alert if record is not None else None
        if alert is not None:
            envelope = envelope_view(alert.dead_letter)
        else:
            excerpt = self._settings.sources.excerpt_max_bytes
            envelope = envelope_view(normalize(raw or b"", names.display(source), excerpt_max=excerpt))
        in_archive = raw is not None
        return EntryView(
            id=digest, source=source, archived_at=record.ms / 1000 if record else None,
            severity=alert.severity if alert else None,
            summary=summary_view(alert, base) if alert else None, envelope=envelope, deliveries=deliveries,
            redrivable=in_archive and source not in self._kinds and names.work_queue(source) is not None
            and redrive_helps(envelope),
            in_archive=in_archive, seen_before=alert.seen_before.line() if alert and alert.seen_before else None,
        )

    # --- groups, undeliverable, silences, audit -------------------------------------------

    async def groups(self) -> list[GroupSummaryView]:
        return await group_summaries(self._redis, self._sinks)

    async def group(self, sink: str, group_key: str, every_member: bool = False) -> GroupView | None:
        """One open group with its first members (`every_member`: all of them, for a redrive)."""
        settings = next((s for s in self._sinks if s.name == sink and s.group_by != "none"), None)
        if settings is None:
            return None
        found = await group_view(self._redis, settings, group_key, *((0,) if every_member else ()))
        return found[0] if found else None

    async def undeliverable(self, limit: int = 100) -> list[UndeliverableView]:
        return [undeliverable_view(s) for s in await self._undeliverable.records(max(limit, 1))]

    async def silences(self, include_expired: bool = False) -> list[SilenceView]:
        now = self._clock()
        found = await SilenceStore(self._redis, self._clock).all()
        return [silence_view(s, now) for s in found if include_expired or now < s.ends_at]

    async def silence(self, silence_id: str) -> SilenceView | None:
        found = await SilenceStore(self._redis, self._clock).get(silence_id)
        return silence_view(found, self._clock()) if found is not None else None

    async def audit(self, limit: int = 100) -> list[AuditRecord]:
        return await AuditLog(self._redis).recent(min(max(limit, 1), 1000))

    async def search(self, query: SearchFilter) -> SearchPage:
        lists = sorted((set(self._list_sources()) | await self._archived_sources()) - set(self._kinds))
        named = [(name, "list") for name in lists] + [(name, ref.kind) for name, ref in self._kinds.items()]
        searcher = Searcher(self._redis, self.search_index, self.views_of, self._deliveries.states)
        return await searcher.search(query, named)


def record_id(stored: Stored) -> str:
    """A stable id for an undeliverable record: the first 16 hex digits of SHA-256 of its stored form."""
    return hashlib.sha256(stored.raw.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def undeliverable_view(stored: Stored) -> UndeliverableView:
    r = stored.record
    return UndeliverableView(
        id=record_id(stored), sink=str(r.get("sink", "?")), sink_type=_opt_str(r.get("sink_type")),
        status=_opt_int(r.get("status")), error=str(r.get("error", "unreadable record")),
        idempotency_key=_opt_str(r.get("idempotency_key")), attempts=_opt_int(r.get("attempts")),
        at=_opt_float(r.get("at")), queue=_opt_str(r.get("queue")), job_id=_opt_str(r.get("job_id")),
        source_key=_opt_str(r.get("source_key")), raw_digest=_opt_str(r.get("raw_digest")),
        group_key=_opt_str(r.get("group_key")), count=_opt_int(r.get("count")),
        retryable=retryable(r),
    )


def _total(sources: Sequence[SourceView]) -> SummarySourceCounts:
    counts = [s.summaries_last_hour for s in sources]
    return SummarySourceCounts(openclaw=sum(c.openclaw for c in counts), cache=sum(c.cache for c in counts),
                               fallback=sum(c.fallback for c in counts))


async def _kind_depth(source: KindReader) -> int | None:
    try:
        return await asyncio.wait_for(source.depth(), KIND_DEPTH_TIMEOUT_S)
    except Exception:  # any client library; the page shows "unknown"
        return None


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
