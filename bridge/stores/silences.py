"""Silences: Alertmanager's silences, for dead letters (docs/design.md, section "Silences").

A silence holds `matchers` (bridge.core.silence_match: queue, job_name, severity, sink, cause and
source with `=`, `!=`, `=~`, `!~`; all must match) from `starts_at` until `ends_at`. A matching
alert is still archived (and shown in the console) but is not handed to the sinks that notify
people (their plug-in's `notifies_people`: Slack, PagerDuty, console); machine receivers (webhooks)
still get it unless the silence says `webhooks = true`.

Stored in one hash, `dlq_bridge:silences` (id → silence JSON), written by console actions and
`dlq-bridge silence`. Release 0.2.0 reads the same hash with its own model: a queue glob, a job
name and a fingerprint (`queue`, `job_name`, `fingerprint`), ignoring fields it does not know. So a
silence is written with those legacy fields only when its matchers say exactly the same thing
(`=` on queue, job_name and cause, each at most once): 0.2.0 then silences exactly what this
release does; any other silence has no legacy field and 0.2.0 reads it as matching nothing (it
never silences more than it should). A silence without `matchers` (0.2.0 wrote it) is matched by
its legacy fields as 0.2.0 matches it, and shown as matchers (`legacy_matchers`).

Edits (`update`): changing the matchers of a silence that has started expires it and creates a
new id (as Alertmanager does; `replaced_by` / `replaces` link them); changing only its end,
comment or webhooks keeps the id (extend). Comments are appended with their author (at most
COMMENTS_MAX kept).

The hand-off reads the hash through `SilenceFilter`, an in-process copy refreshed at most every
`refresh_s` (one HGETALL a second per replica, never one per entry), so a new or expired silence
takes effect on every replica within about a second. Silences ended more than `KEEP_ENDED_S` ago
are dropped when the list is written.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence

import redis.asyncio as redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.exceptions import RedisError

from bridge.core.models import Alert
from bridge.core.silence_match import Matcher, alert_labels, escape_glob, glob_to_regex, matches_all
from bridge.stores import keys

log = logging.getLogger(__name__)

REFRESH_S = 1.0
KEEP_ENDED_S = 7 * 24 * 3600
COMMENTS_MAX = 50
_LEGACY = {"queue": "queue", "job_name": "job_name", "cause": "fingerprint"}  # label -> 0.2.0's field


class Comment(BaseModel):
    """A note on a silence, with who wrote it and when."""

    model_config = ConfigDict(frozen=True)

    author: str = Field(max_length=200)
    at: float
    text: str = Field(max_length=1000)


class Silence(BaseModel):
    """One silence as stored (0.2.0's fields first; `matchers` and after are this release's)."""

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
    matchers: list[Matcher] | None = None
    comments: list[Comment] = Field(default_factory=list)
    updated_by: str | None = None
    replaces: str | None = None
    replaced_by: str | None = None

    def active(self, now: float) -> bool:
        return self.starts_at <= now < self.ends_at

    def shown_matchers(self) -> list[Matcher]:
        """The matchers, or a 0.2.0 silence's fields as matchers."""
        return list(self.matchers) if self.matchers is not None else legacy_matchers(self)

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        """Every matcher matches (a 0.2.0 silence: every given field, as 0.2.0 matches them)."""
        if self.matchers is not None:
            return matches_all(self.matchers, labels)
        if self.queue is None and self.job_name is None and self.fingerprint is None:
            return False
        if self.queue is not None and not fnmatch.fnmatchcase(labels.get("queue", ""), self.queue):
            return False
        if self.job_name is not None and labels.get("job_name", "") != self.job_name:
            return False
        return self.fingerprint is None or labels.get("cause", "") == self.fingerprint

    def matches_but_sink(self, labels: Mapping[str, str]) -> bool:
        """Every matcher not on the sink matches (checked once per alert; `sink_matches` per sink)."""
        if self.matchers is None:
            return self.matches_labels(labels)
        return bool(self.matchers) and all(m.matches(labels) for m in self.matchers if m.name != "sink")

    def sink_matches(self, sink: str) -> bool:
        return self.matchers is None or all(m.matches({"sink": sink}) for m in self.matchers if m.name == "sink")

    def matches(self, alert: Alert, sink: str = "") -> bool:
        return self.matches_labels(alert_labels(alert, sink))

    def silences(self, notifies_people: bool) -> bool:
        """Does it hold back a sink? One that notifies people always; a machine receiver only when asked."""
        return notifies_people or self.webhooks


def legacy_fields(matchers: Sequence[Matcher]) -> dict[str, str]:
    """0.2.0's fields saying exactly what `matchers` say, or {} when 0.2.0 cannot say it."""
    names = [m.name for m in matchers]
    exact = all(m.op == "=" and m.name in _LEGACY and m.value for m in matchers) and len(set(names)) == len(names)
    if not exact or not matchers:
        return {}
    return {_LEGACY[m.name]: escape_glob(m.value) if m.name == "queue" else m.value for m in matchers}


def legacy_matchers(silence: Silence) -> list[Matcher]:
    """A 0.2.0 silence's fields as matchers (a queue glob becomes the equivalent anchored regex)."""
    found = []
    if silence.queue is not None:
        plain = not any(c in silence.queue for c in "*?[")
        found.append(
            Matcher(name="queue", op="=", value=silence.queue)
            if plain
            else Matcher(name="queue", op="=~", value=glob_to_regex(silence.queue))
        )
    if silence.job_name is not None:
        found.append(Matcher(name="job_name", op="=", value=silence.job_name))
    if silence.fingerprint is not None:
        found.append(Matcher(name="cause", op="=", value=silence.fingerprint))
    return found


def new_silence(
    matchers: Sequence[Matcher],
    starts_at: float,
    ends_at: float,
    *,
    author: str,
    comment: str = "",
    webhooks: bool = False,
    replaces: str | None = None,
) -> Silence:
    """A silence with a fresh id, its legacy fields set only when they say exactly the same."""
    return Silence.model_validate(
        {
            "id": new_id(),
            **legacy_fields(matchers),
            "matchers": list(matchers),
            "starts_at": starts_at,
            "ends_at": ends_at,
            "reason": comment,
            "author": author,
            "webhooks": webhooks,
            "replaces": replaces,
        }
    )


def new_id() -> str:
    return secrets.token_hex(8)


class SilenceEdit(BaseModel):
    """What an edit changes (None: unchanged)."""

    model_config = ConfigDict(frozen=True)

    matchers: list[Matcher] | None = None
    ends_at: float | None = None
    comment: str | None = None
    webhooks: bool | None = None


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

    async def update(self, silence_id: str, edit: SilenceEdit, who: str) -> tuple[Silence, Silence | None] | None:
        """Apply `edit`: (the silence now in force, the one it replaced or None); None when no such silence.

        New matchers on a silence that has started expire it and create a new id; anything
        else (a later end: extend) keeps the id.
        """
        found = await self.get(silence_id)
        if found is None:
            return None
        now = self._clock()
        ends = edit.ends_at if edit.ends_at is not None else found.ends_at
        comment = edit.comment if edit.comment is not None else found.reason
        webhooks = edit.webhooks if edit.webhooks is not None else found.webhooks
        changed = edit.matchers is not None and edit.matchers != found.shown_matchers()
        if changed and found.starts_at <= now:
            assert edit.matchers is not None
            fresh = new_silence(
                edit.matchers, now, ends, author=who, comment=comment, webhooks=webhooks, replaces=found.id
            )
            old = found.model_copy(
                update={"ends_at": min(found.ends_at, now), "expired_by": who, "replaced_by": fresh.id}
            )
            await self._redis.hset(
                keys.SILENCES, mapping={old.id: old.model_dump_json(), fresh.id: fresh.model_dump_json()}
            )
            return fresh, old
        matchers = edit.matchers if changed else found.matchers
        fields = legacy_fields(matchers) if matchers is not None else {}
        legacy = (
            {"queue": fields.get("queue"), "job_name": fields.get("job_name"), "fingerprint": fields.get("fingerprint")}
            if changed
            else {}
        )
        kept = found.model_copy(
            update={
                **legacy,
                "matchers": matchers,
                "ends_at": ends,
                "reason": comment,
                "webhooks": webhooks,
                "updated_by": who,
            }
        )
        await self.put(kept)
        return kept, None

    async def comment(self, silence_id: str, author: str, text: str) -> Silence | None:
        """Append a comment (the oldest dropped past COMMENTS_MAX); None when no such silence."""
        found = await self.get(silence_id)
        if found is None:
            return None
        notes = [*found.comments, Comment(author=author, at=self._clock(), text=text)][-COMMENTS_MAX:]
        kept = found.model_copy(update={"comments": notes})
        await self.put(kept)
        return kept

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
        labels = alert_labels(alert)
        candidates = [s for s in self._silences if s.active(now) and s.matches_but_sink(labels)]
        kept: list[str] = []
        silenced: dict[str, str] = {}
        for sink in sinks:
            holds = self._notifies.get(sink, False)
            hit = next((s for s in candidates if s.silences(holds) and s.sink_matches(sink)), None)
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
