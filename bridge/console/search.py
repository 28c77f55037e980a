"""Search the archived entries of every source, newest first (docs/design.md, "Console search").

A filter (`SearchFilter`, all fields optional, all given ones must match):

    source   glob over source names     kind      list, sidekiq, bullmq, …
    queue    glob over queues           job       job name (exact)
    error    error class (exact)        fp        fingerprint (the cause group)
    summary  openclaw, cache, fallback  state     delivered, pending, undeliverable, silenced, …
    text     words of the redacted error or excerpt (case-insensitive; every word must be one of
             its words; a word the index skips, shorter than 3 or starting with a digit, must be a part)
    since / until   hand-off time range (epoch seconds)
    before   the page cursor (the score of the previous page's last entry)
    as_of    the snapshot: only entries scored at or below it (handed off no later than the page that
             showed them); a first page answers its own as `snapshot`, which bulk actions take

Per source, the narrowest set (an exact facet: fp, error, job, summary; else
the rarest query word's set; else the queue sets matching the glob; else the
three summary sets, which hold every entry; bridge.stores.search_index) is
read newest first with one ZREVRANGEBYSCORE; candidates of all sources are
merged by score (unique: ms plus a tie-break), their records fetched with one
HMGET per source, and the other conditions checked in Python. The state filter needs each candidate's delivery state
(bridge.console.entries.DeliveryReader). At most `SCAN_MAX` candidates, and
rounds for at most `TIME_BUDGET_S`, are checked per page (a rare delivery state
costs its lookups per candidate); a page that stopped there says so
(`complete: false`) and its cursor continues where it stopped.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import redis.asyncio as redis
from pydantic import BaseModel, ConfigDict, Field

from bridge.console.views import EntryView, SinkDelivery
from bridge.stores.archive import Archive, Record
from bridge.stores.search_index import SearchIndex, by_facet, facet_values, record_words, words_of

SCAN_MAX = 5000
TIME_BUDGET_S = 0.15  # a page checks no new round after this long (bench: a rare state, 5,000 candidates, ~1.5 s)
BATCH = 400
CHECK_PAGES = 4  # a round of candidates to check (text, state, two facets): four pages' worth, at most BATCH
PER_SET_MIN = 4  # rows read per set and round at least (many sets: a few rows each, more rounds if skewed)
TEXT_MAX = 200
TIME_MAX = 1e11  # unix seconds (year 5138): a finite bound so `since`/`until` convert to milliseconds
SummaryName = Literal["", "openclaw", "cache", "fallback"]
SUMMARIES = ("openclaw", "cache", "fallback")
StateName = Literal["", "delivered", "duplicate", "pending", "grouped", "undeliverable", "silenced", "unknown"]
Short = Field(default="", max_length=512)
SCORE = r"^$|^[0-9]+(\.[0-9]+)?$"


class SearchFilter(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Short
    kind: str = Field(default="", max_length=64)
    queue: str = Short
    job: str = Short
    error: str = Short
    fp: str = Field(default="", max_length=128)
    summary: SummaryName = ""
    state: StateName = ""
    text: str = Field(default="", max_length=TEXT_MAX)
    since: float | None = Field(default=None, ge=0, le=TIME_MAX, allow_inf_nan=False)
    until: float | None = Field(default=None, ge=0, le=TIME_MAX, allow_inf_nan=False)
    before: str = Field(default="", max_length=40, pattern=SCORE)
    as_of: str = Field(default="", max_length=40, pattern=SCORE,
                       description="Only entries at or below this score (a page's `snapshot`).")
    limit: int = Field(default=25, ge=1, le=100)


class SearchPage(BaseModel):
    filter: SearchFilter
    entries: list[EntryView]
    next_before: str | None = Field(description="The cursor of the next (older) page; None at the end.")
    scanned: int = Field(description="Candidates checked for this page.")
    complete: bool = Field(description="False when the scan stopped at its bound (candidates or time) before "
                                       "the archive's end: `next_before` continues it.")
    snapshot: str | None = Field(default=None, description=(
        "The score of the newest match as this page saw it (or the filter's `as_of`): pass it as `as_of` "
        "to page on, or to a bulk action, so entries handed off later are never included."))


@dataclass(frozen=True)
class Candidate:
    score: float
    digest: str
    source: str


Views = Callable[[list[tuple[str, str, bytes | None, Any]]], Awaitable[list[EntryView]]]
States = Callable[[Sequence[Record]], Awaitable[list[list[SinkDelivery]]]]
Match = tuple[Candidate, bytes | None, Any]


class Searcher:
    def __init__(self, client: redis.Redis, index: SearchIndex, views: Views, states: States,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._redis = client
        self._clock = clock
        self._index = index
        self._views = views
        self._states = states

    async def search(self, f: SearchFilter, sources: Sequence[tuple[str, str]]) -> SearchPage:
        """`sources` are (name, kind) pairs; returns one page of matches, newest first."""
        chosen = [name for name, kind in sources if _source_matches(f, name, kind)]
        await self._index.refresh(chosen)
        drivers = await self._drivers(f, chosen)
        ceiling = _ceiling(f)
        matches: list[Match] = []
        scanned, exhausted, deadline = 0, False, self._clock() + TIME_BUDGET_S
        while len(matches) <= f.limit and scanned < SCAN_MAX and (scanned == 0 or self._clock() < deadline):
            batch, exhausted = await self._next_batch(f, drivers, ceiling)
            scanned += len(batch)
            matches.extend(await self._check(f, batch))
            if exhausted or not batch:
                exhausted = True
                break
            ceiling = f"({batch[-1].score!r}"
        page = matches[: f.limit]
        entries = await self._entry_views(page)
        if len(matches) > f.limit:
            next_before: str | None = repr(page[-1][0].score)
        else:
            next_before = None if exhausted else ceiling.lstrip("(")
        snapshot = f.as_of or (repr(page[0][0].score) if page and not f.before else None)
        return SearchPage(filter=f, entries=entries, next_before=next_before, scanned=scanned,
                          complete=exhausted or len(matches) > f.limit, snapshot=snapshot)

    async def _entry_views(self, page: Sequence[Match]) -> list[EntryView]:
        """The page's views, their delivery states read in one batch, in the page's order."""
        return await self._views([(c.source, c.digest, raw, stored) for c, raw, stored in page])

    async def _drivers(self, f: SearchFilter, sources: Sequence[str]) -> dict[str, list[bytes]]:
        """Per source, the sorted sets whose union holds every candidate (see module doc)."""
        exact = _exact_facet(f)
        if exact is not None:
            return {source: [by_facet(source, *exact)] for source in sources}
        words = words_of(f.text)
        if words:
            return await self._rarest_words(sources, words)
        if f.queue:
            present = await self._index.queues(sources)
            return {source: [by_facet(source, "queue", q) for q in queues if fnmatch.fnmatchcase(q, f.queue)]
                    for source, queues in present.items()}
        return {source: [by_facet(source, "summary", name) for name in SUMMARIES] for source in sources}

    async def _rarest_words(self, sources: Sequence[str], words: Sequence[str]) -> dict[str, list[bytes]]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in sources:
                for word in words:
                    pipe.zcard(by_facet(source, "w", word))
            counts = await pipe.execute() if sources else []
        out: dict[str, list[bytes]] = {}
        for i, source in enumerate(sources):
            sizes = [int(n) for n in counts[i * len(words) : (i + 1) * len(words)]]
            if min(sizes) > 0:  # a word no entry of this source has: nothing here matches
                out[source] = [by_facet(source, "w", words[sizes.index(min(sizes))])]
        return out

    async def _next_batch(
        self, f: SearchFilter, drivers: dict[str, list[bytes]], ceiling: str
    ) -> tuple[list[Candidate], bool]:
        """The next candidates at or below `ceiling`, merged across sources, newest first; and
        whether every set is read to its end."""
        floor = repr(float(int(f.since * 1000))) if f.since is not None else "-inf"
        pairs = [(s, k) for s, ks in drivers.items() for k in ks]
        exact = _exact(f)
        size = f.limit + 1 if exact else min(BATCH, CHECK_PAGES * (f.limit + 1))
        # rows per set: enough that the merge of all sets yields about a batch, at least PER_SET_MIN
        per = min(size, max(PER_SET_MIN, 2 * size // max(1, len(pairs))))
        async with self._redis.pipeline(transaction=False) as pipe:
            for _source, key in pairs:
                pipe.zrevrangebyscore(key, ceiling, floor, start=0, num=per, withscores=True)
            replies = await pipe.execute() if pairs else []
        found: dict[tuple[str, str], Candidate] = {}
        horizon = float("-inf")
        for (source, _key), rows in zip(pairs, replies, strict=True):
            for member, score in rows:
                digest = member.decode() if isinstance(member, bytes) else str(member)
                found[(source, digest)] = Candidate(float(score), digest, source)
            if len(rows) >= per:
                horizon = max(horizon, float(rows[-1][1]))  # below this, this set was not read yet
        ordered = sorted(found.values(), key=lambda c: c.score, reverse=True)
        kept = [c for c in ordered if c.score >= horizon][:size]
        return kept, horizon == float("-inf") and len(kept) == len(ordered)

    async def _check(self, f: SearchFilter, batch: Sequence[Candidate]) -> list[Match]:
        by_source: dict[str, list[Candidate]] = {}
        for cand in batch:
            by_source.setdefault(cand.source, []).append(cand)
        async with self._redis.pipeline(transaction=False) as pipe:
            for source, cands in by_source.items():
                Archive.queue_records(pipe, source, [c.digest for c in cands])
            replies = await pipe.execute() if by_source else []
        stored = {(c.source, c.digest): raw for (_s, cands), raws in zip(by_source.items(), replies, strict=True)
                  for c, raw in zip(cands, raws, strict=True)}
        exact = _exact(f)
        kept = [(c, stored.get((c.source, c.digest))) for c in batch]
        kept = [(c, raw) for c, raw in kept if raw is not None and (exact or _record_matches(f, raw))]
        if f.state:
            kept = await self._with_state(f.state, kept)
        return [(c, None, raw) for c, raw in kept]

    async def _with_state(self, state: str, kept: list[tuple[Candidate, Any]]) -> list[tuple[Candidate, Any]]:
        records = [Record.parse(raw) for _c, raw in kept]
        known = [(c, raw, r) for (c, raw), r in zip(kept, records, strict=True) if r is not None]
        states = await self._states([r for _c, _raw, r in known])
        return [(c, raw) for (c, raw, _r), found in zip(known, states, strict=True)
                if any(d.state == state for d in found)]


def _exact_facet(f: SearchFilter) -> tuple[str, str] | None:
    return next(((facet, value) for facet, value in (("fp", f.fp), ("error", f.error), ("job", f.job),
                                                     ("summary", f.summary)) if value), None)


def _exact(f: SearchFilter) -> bool:
    """True when the driving sets alone decide the match (no record needs checking)."""
    facets = sum(1 for value in (f.fp, f.error, f.job, f.summary) if value)
    single_word = f.text.strip() != "" and words_of(f.text) == f.text.casefold().split() and len(f.text.split()) == 1
    if f.state:
        return False
    if f.text:
        return single_word and facets == 0 and not f.queue
    return facets == 0 or (facets == 1 and not f.queue)


def _ceiling(f: SearchFilter) -> str:
    tops = [float(int(f.until * 1000)) + 0.9999] if f.until is not None else []
    tops += [float(f.as_of)] if f.as_of else []
    top = repr(min(tops)) if tops else "+inf"
    if not f.before:
        return top
    return f"({f.before}" if not tops or float(f.before) < float(top) else top


def _source_matches(f: SearchFilter, name: str, kind: str) -> bool:
    if f.kind and f.kind != kind:
        return False
    return not f.source or fnmatch.fnmatchcase(name, f.source) or name == f.source


def _record_matches(f: SearchFilter, raw: Any) -> bool:
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    words = f.text.casefold().split()
    if words:
        whole = data.decode("utf-8", "replace").casefold()
        if any(w not in whole for w in words):
            return False  # cheap: a word missing from the whole record is missing from its error too
    try:
        record = orjson.loads(data)
        values = facet_values(record)
    except (ValueError, TypeError, KeyError, AttributeError):
        return False
    for facet, wanted in (("error", f.error), ("fp", f.fp), ("job", f.job), ("summary", f.summary)):
        if wanted and values[facet] != wanted:
            return False
    if f.queue and not fnmatch.fnmatchcase(values["queue"], f.queue):
        return False
    return not words or _text_matches(words, record)


def _text_matches(words: Sequence[str], record: dict[str, Any]) -> bool:
    """Every query word is a word of the redacted error or excerpt (an unindexable one: a part of it)."""
    present = set(record_words(record))
    alert = record.get("alert") or orjson.loads(record["parcel"]["alert"])
    dl = alert.get("dead_letter") or {}
    haystack = f"{dl.get('last_error') or ''}\n{dl.get('payload_excerpt') or ''}".casefold()
    return all((w in present) if words_of(w) == [w] else (w in haystack) for w in words)
