"""Silences: Alertmanager's silences, for dead letters (docs/design.md, section "Silences").

A silence matches an alert on any of a queue glob, a job name and a
fingerprint (at least one; all given must match) until `ends_at`. A matching
alert is still archived (and shown in the console) but is not handed to the
sinks that notify people (their plug-in's `notifies_people`: Slack, PagerDuty,
console); machine receivers (webhooks) still get it unless the silence says
`webhooks = true`.

Stored in one hash, `dlq_bridge:silences` (id → silence JSON), written only
by console actions. The hand-off reads it through `SilenceFilter`, an
in-process copy refreshed at most every `refresh_s` (one HGETALL a second per
replica, never one per entry), so a new or expired silence takes effect on
every replica within about a second. Silences ended more than `KEEP_ENDED_S`
ago are dropped when the list is written.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence

import redis.asyncio as redis
from pydantic import BaseModel, ConfigDict, ValidationError
from redis.exceptions import RedisError

from bridge.core.models import Alert
from bridge.stores import keys

log = logging.getLogger(__name__)

REFRESH_S = 1.0
KEEP_ENDED_S = 7 * 24 * 3600


class Silence(BaseModel):
    """One silence as stored."""

    model_config = ConfigDict(frozen=True)

    id: str
    queue: str | None = None
    job_name: str | None = None
    fingerprint: str | None = None
    starts_at: float
    ends_at: float
    reason: str = ""
    author: str = ""
    webhooks: bool = False
    expired_by: str | None = None

    def active(self, now: float) -> bool:
        return self.starts_at <= now < self.ends_at

    def matches(self, alert: Alert) -> bool:
        """Every matcher given matches (a silence without matchers matches nothing)."""
        dl = alert.dead_letter
        if self.queue is None and self.job_name is None and self.fingerprint is None:
            return False
        if self.queue is not None and not fnmatch.fnmatchcase(dl.queue, self.queue):
            return False
        if self.job_name is not None and dl.job_name != self.job_name:
            return False
        return self.fingerprint is None or dl.fingerprint == self.fingerprint

    def silences(self, notifies_people: bool) -> bool:
        """Does it hold back a sink? One that notifies people always; a machine receiver only when asked."""
        return notifies_people or self.webhooks


def new_id() -> str:
    return secrets.token_hex(8)


class SilenceStore:
    """Read and write the silences hash."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self._clock = clock

    async def all(self) -> list[Silence]:
        """Every stored silence, newest end first; unreadable ones are skipped (and logged)."""
        raw = await self._redis.hgetall(keys.SILENCES)
        found = []
        for value in raw.values():
            try:
                found.append(Silence.model_validate_json(value))
            except (ValidationError, ValueError):
                log.warning("an unreadable silence is ignored")
        return sorted(found, key=lambda s: (-s.ends_at, s.id))

    async def get(self, silence_id: str) -> Silence | None:
        value = await self._redis.hget(keys.SILENCES, silence_id)
        if value is None:
            return None
        try:
            return Silence.model_validate_json(value)
        except (ValidationError, ValueError):
            return None

    async def put(self, silence: Silence) -> None:
        await self._redis.hset(keys.SILENCES, silence.id, silence.model_dump_json())
        await self._prune()

    async def expire(self, silence_id: str, who: str) -> Silence | None:
        """End a silence now; None when there is no such silence."""
        found = await self.get(silence_id)
        if found is None:
            return None
        now = self._clock()
        ended = found.model_copy(update={"ends_at": min(found.ends_at, now), "expired_by": who})
        await self.put(ended)
        return ended

    async def _prune(self) -> None:
        cutoff = self._clock() - KEEP_ENDED_S
        old = [s.id for s in await self.all() if s.ends_at < cutoff]
        if old:
            await self._redis.hdel(keys.SILENCES, *old)


class SilenceFilter:
    """The hand-off's view of the active silences: an in-process copy refreshed every `refresh_s`."""

    def __init__(
        self,
        store: SilenceStore,
        notifies_people: Mapping[str, bool],
        *,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._notifies = dict(notifies_people)
        self._refresh_s = refresh_s
        self._clock = clock
        self._monotonic = monotonic
        self._silences: list[Silence] = []
        self._loaded_at: float | None = None
        self._lock = asyncio.Lock()

    def remember(self, silence: Silence) -> None:
        """Take a silence just written in this process into account at once."""
        self._silences = [s for s in self._silences if s.id != silence.id] + [silence]

    async def split(self, alert: Alert, sinks: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """The sinks to hand `alert` to, and the silenced ones (sink → silence id)."""
        await self._fresh()
        now = self._clock()
        matching = [s for s in self._silences if s.active(now) and s.matches(alert)]
        kept, silenced = [], {}
        for sink in sinks:
            hit = next((s for s in matching if s.silences(self._notifies.get(sink, False))), None)
            if hit is None:
                kept.append(sink)
            else:
                silenced[sink] = hit.id
        return kept, silenced

    async def _fresh(self) -> None:
        if self._loaded_at is not None and self._monotonic() - self._loaded_at < self._refresh_s:
            return
        async with self._lock:
            if self._loaded_at is not None and self._monotonic() - self._loaded_at < self._refresh_s:
                return
            try:
                self._silences = await self._store.all()
            except (RedisError, OSError) as exc:  # keep the last copy; try again next time
                log.warning("silences not refreshed (%s); using the last copy", type(exc).__name__)
            self._loaded_at = self._monotonic()
