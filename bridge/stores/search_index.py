"""The console's search index: sorted sets per facet value, built lazily from the entry records.

The hand-off (bridge.stores.handoff) already writes, per source, the entry records
(`dlq_bridge:entries:<ref>`, digest → record) and their index (`…:index`,
digest → hand-off ms), trimmed together to `sources.archive_max`. This module
reads new records from that index and adds, in the source's own slot:

    dlq_bridge:entries:<ref>:by:<facet>:<value>   ZSET digest → score (ms + tie-break), one per value
    dlq_bridge:entries:<ref>:facets               HASH "<facet>:<value>" → newest score (the values there are)
    dlq_bridge:entries:<ref>:queues               HASH queue → newest score (what a queue glob is matched on)
    dlq_bridge:entries:<ref>:indexed              STRING the highest ms indexed so far
    dlq_bridge:entries:<ref>:acted                HASH digest → who acted on it (bridge.console.history)
    dlq_bridge:entries:<ref>:jobs                 ZSET (score 0) "<job id>\\0<ms, 15 digits>\\0<digest>": every
                                                  hand-off of a job, read by lex range (an entry's history)

Facets: `error` (error class), `fp` (fingerprint), `job` (job name), `queue`,
`summary` (openclaw, cache, fallback: together every entry), and `w`: each
word (a letter then 2-31 word characters, casefolded, at most 24 per entry) of
the redacted error and excerpt. A member's score is its hand-off ms plus a
tie-break below the millisecond from its digest, so every entry has its own
place and a page cursor is one score. Trimming runs at most once a minute per
source, from a search and from the drain's upkeep (`trim_indexed`), which trims
every source named in `dlq_bridge:search:indexed` whether or not anyone searches:
the index never holds entries older than the oldest record the hand-off kept.
Cost per entry: one sorted-set member in each of its facet sets (5,
plus one per word), measured in bytes and commands by
bench/bench_console_search.py; the members of one chunk (2,000 entries) go out
as one ZADD per facet value and one HSET of the values seen (pipelined: one
round trip per chunk). Indexing is lazy (a search first indexes what was
handed off since, checking at most once a second), so the hand-off is untouched; see docs/design.md, "Console search".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import redis.asyncio as redis

from bridge.core import names
from bridge.intake.fingerprint import error_class
from bridge.stores import keys

FACETS = ("error", "fp", "job", "queue", "summary", "w")
INDEX_CHUNK = 2000
VALUE_MAX = 200
WORD = re.compile(r"[^\W\d_][\w]{2,31}")  # a word: a letter, then 2-31 word characters
WORDS_MAX = 24  # distinct words indexed per entry (of the redacted error, then the excerpt)
TRIM_EVERY_S = 60.0
REFRESH_EVERY_S = 1.0  # a search sees hand-offs at most this old (the index checks once a second)
JOBS_SLACK = 2  # the jobs set is cleaned of trimmed hand-offs once it holds twice the records kept
ACTED_MAX = 20  # actions kept per entry (who redrove or discarded it, when)
TIE_STEPS = 4096  # ms < 2**41: 12 bits of a double's 53 are left for a tie-break below the millisecond


def score_of(ms: float, digest: str) -> float:
    """The entry's score in the facet sets: its ms plus a tie-break from its digest (page cursors need order)."""
    try:
        tie = int(digest[:3], 16)
    except ValueError:
        tie = 0
    return float(int(ms)) + tie / TIE_STEPS


def words_of(text: str) -> list[str]:
    """The distinct indexed words of `text`, casefolded, in order, at most WORDS_MAX."""
    seen: dict[str, None] = {}
    for match in WORD.finditer(text.casefold()):
        seen.setdefault(match.group(), None)
        if len(seen) >= WORDS_MAX:
            break
    return list(seen)


def by_facet(source: str, facet: str, value: str) -> bytes:
    return names.encode(f"{keys.entry_records(source)}:by:{facet}:{value[:VALUE_MAX]}")


def facets_key(source: str) -> bytes:
    return names.encode(f"{keys.entry_records(source)}:facets")


def queues_key(source: str) -> bytes:
    return names.encode(f"{keys.entry_records(source)}:queues")


def jobs_key(source: str) -> bytes:
    return names.encode(f"{keys.entry_records(source)}:jobs")


def job_member(job_id: str, ms: float, digest: str) -> str:
    return f"{job_id[:VALUE_MAX]}\0{int(ms):015d}\0{digest}"


def acted_key(source: str) -> bytes:
    """HASH digest → who acted on the entry (the console or the CLI; bridge.console.history reads it)."""
    return names.encode(f"{keys.entry_records(source)}:acted")


async def record_act(client: redis.Redis, source: str, digest: str, who: str, action: str, at: float) -> None:
    """Append one action to the entry's list in `acted_key` (the last ACTED_MAX kept)."""
    await record_acts(client, source, [digest], who, action, at)


async def record_acts(
    client: redis.Redis, source: str, digests: Sequence[str], who: str, action: str, at: float
) -> None:
    """`record_act` for many entries of one source: one HMGET, one HSET."""
    if not digests:
        return
    acted = acted_key(source)
    mapping = {}
    for digest, raw in zip(digests, await client.hmget(acted, list(digests)), strict=True):
        found: list[Any] = orjson.loads(raw) if raw else []
        mapping[digest] = orjson.dumps([*found, {"who": who, "action": action, "at": at}][-ACTED_MAX:])
    await client.hset(acted, mapping=mapping)  # type: ignore[arg-type]  # bytes values are fine


def member_ms(member: Any) -> int:
    """The hand-off ms of a jobs-set member (0 when unreadable: it is dropped at the next clean-up)."""
    parts = names.text(member).rsplit("\0", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


def indexed_key(source: str) -> bytes:
    return names.encode(f"{keys.entry_records(source)}:indexed")


def facet_values(record: dict[str, Any]) -> dict[str, str]:
    """The single-valued facets of one parsed record (json), "" where it has none."""
    alert = record.get("alert")
    if alert is None and isinstance(record.get("parcel"), dict):
        alert = orjson.loads(record["parcel"]["alert"])
    dl = (alert or {}).get("dead_letter") or {}
    summary = (alert or {}).get("summary") or {}
    return {"error": error_class(dl.get("last_error")), "fp": str(dl.get("fingerprint") or ""),
            "job": str(dl.get("job_name") or ""), "queue": str(dl.get("queue") or ""),
            "summary": str(summary.get("source") or "")}


def job_of(record: dict[str, Any]) -> str:
    alert = record.get("alert")
    if alert is None and isinstance(record.get("parcel"), dict):
        alert = orjson.loads(record["parcel"]["alert"])
    return str(((alert or {}).get("dead_letter") or {}).get("job_id") or "")


def record_words(record: dict[str, Any]) -> list[str]:
    alert = record.get("alert")
    if alert is None and isinstance(record.get("parcel"), dict):
        alert = orjson.loads(record["parcel"]["alert"])
    dl = (alert or {}).get("dead_letter") or {}
    return words_of(f"{dl.get('last_error') or ''}\n{dl.get('payload_excerpt') or ''}")


def _members(rows: Iterable[tuple[str, float, Any]]) -> tuple[dict[tuple[str, str], dict[str, float]],
                                                               dict[str, float]]:
    """The facet-set members of a chunk of records, grouped by (facet, value); and the jobs-set members."""
    members: dict[tuple[str, str], dict[str, float]] = {}
    jobs: dict[str, float] = {}
    for digest, ms, raw in rows:
        if raw is None:
            continue
        try:
            record = orjson.loads(raw)
            pairs = [*facet_values(record).items(), *(("w", w) for w in record_words(record))]
            job_id = job_of(record)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        if job_id:
            jobs[job_member(job_id, ms, digest)] = 0.0
        score = score_of(ms, digest)
        for facet, value in pairs:
            if value:
                members.setdefault((facet, value[:VALUE_MAX]), {})[digest] = score
    return members, jobs


class SearchIndex:
    """Keeps the facet sets of every source up to date with its record index."""

    def __init__(self, client: redis.Redis, clock: Any = time.monotonic) -> None:
        self._redis = client
        self._clock = clock
        self._trimmed: dict[str, float] = {}
        self._fresh: tuple[float, tuple[str, ...]] | None = None
        self._known: set[str] = set()  # sources this process saw in the registry of indexed sources

    async def refresh(self, sources: Sequence[str]) -> int:
        """Index every record newer than each source's mark (at most once per REFRESH_EVERY_S for the
        same sources); returns how many were indexed."""
        now, wanted = self._clock(), tuple(sources)
        if self._fresh is not None and self._fresh[1] == wanted and now - self._fresh[0] < REFRESH_EVERY_S:
            return 0
        self._fresh = (now, wanted)
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in sources:
                pipe.get(indexed_key(source))
                pipe.zrevrange(names.encode(keys.entry_index(source)), 0, 0, withscores=True)
            replies = await pipe.execute() if sources else []
        done = 0
        for i, source in enumerate(sources):
            mark, newest = replies[2 * i], replies[2 * i + 1]
            if newest and (mark is None or float(newest[0][1]) > float(mark)):
                done += await self._index_source(source, float(mark) if mark is not None else float("-inf"))
        return done

    async def _index_source(self, source: str, mark: float) -> int:
        if source not in self._known:  # named before it is written, so the upkeep trims it
            await self._redis.sadd(keys.SEARCH_INDEXED, names.encode(source))
            self._known.add(source)
        index, done, low = names.encode(keys.entry_index(source)), 0, mark
        while True:
            members: list[Any] = list(await self._redis.zrangebyscore(
                index, low, "+inf", start=0, num=INDEX_CHUNK, withscores=True))
            if not members:
                break
            digests = [names.text(d) for d, _ in members]
            records = await self._redis.hmget(names.encode(keys.entry_records(source)), digests)
            top = float(members[-1][1])
            await self._write(source, zip(digests, [float(s) for _, s in members], records, strict=True), top)
            done += len(members)
            if len(members) < INDEX_CHUNK or top == low:
                break
            low = top
        await self._trim_due(source)
        return done

    async def trim_indexed(self) -> int:
        """Trim every indexed source not trimmed in the last TRIM_EVERY_S (the drain's upkeep calls
        this every minute, so the index is bounded by the records without anyone searching);
        returns how many were trimmed. A source with no record left is dropped from the registry."""
        trimmed = 0
        for raw in await self._redis.smembers(keys.SEARCH_INDEXED):
            source = names.decode(raw)
            trimmed += await self._trim_due(source)
            if await self._redis.zcard(names.encode(keys.entry_index(source))) == 0:
                await self._redis.srem(keys.SEARCH_INDEXED, raw)
                self._known.discard(source)
        return trimmed

    async def _trim_due(self, source: str) -> int:
        if self._clock() - self._trimmed.get(source, float("-inf")) < TRIM_EVERY_S:
            return 0
        self._trimmed[source] = self._clock()
        await self._trim(source)
        return 1

    async def _write(self, source: str, rows: Iterable[tuple[str, float, Any]], top: float) -> None:
        """One chunk: one ZADD per facet value present (members grouped), one HSET of the values seen,
        one ZADD of the jobs set."""
        members, jobs = _members(rows)
        async with self._redis.pipeline(transaction=False) as pipe:
            for (facet, value), scored in members.items():
                pipe.zadd(by_facet(source, facet, value), scored)
            if members:
                pipe.hset(facets_key(source), mapping={f"{f}:{v}": max(m.values()) for (f, v), m in members.items()})
                queues: dict[Any, Any] = {v: max(m.values()) for (f, v), m in members.items() if f == "queue"}
                if queues:
                    pipe.hset(queues_key(source), mapping=queues)
            if jobs:
                pipe.zadd(jobs_key(source), jobs)
            pipe.set(indexed_key(source), top)
            await pipe.execute()

    async def _trim(self, source: str) -> None:
        """Drop facet members older than the oldest record still kept (the hand-off trims records)."""
        oldest = await self._redis.zrange(names.encode(keys.entry_index(source)), 0, 0, withscores=True)
        floor = float(oldest[0][1]) if oldest else float(2**53)  # no record left: drop the whole index
        values = await self._redis.hgetall(facets_key(source))
        async with self._redis.pipeline(transaction=False) as pipe:
            for name, newest in values.items():
                facet, _, value = names.text(name).partition(":")
                pipe.zremrangebyscore(by_facet(source, facet, value), "-inf", f"({int(floor)}")
                if float(newest) < floor:
                    pipe.hdel(facets_key(source), name)
                    if facet == "queue":
                        pipe.hdel(queues_key(source), value)
            pipe.zcard(jobs_key(source))
            pipe.zcard(names.encode(keys.entry_index(source)))
            *_done, jobs, records = await pipe.execute()
        if int(jobs) > JOBS_SLACK * int(records):  # hand-offs the record trim dropped: rebuild
            stale: list[Any] = [m for m in await self._redis.zrange(jobs_key(source), 0, -1) if member_ms(m) < floor]
            for i in range(0, len(stale), INDEX_CHUNK):
                await self._redis.zrem(jobs_key(source), *stale[i : i + INDEX_CHUNK])
        acted = await self._redis.hkeys(acted_key(source))
        if acted:  # the actions of entries whose record the hand-off trimmed
            kept = await self._redis.hmget(names.encode(keys.entry_records(source)), acted)
            gone = [name for name, record in zip(acted, kept, strict=True) if record is None]
            if gone:
                await self._redis.hdel(acted_key(source), *gone)

    async def queues(self, sources: Sequence[str]) -> dict[str, list[str]]:
        """The queues present in each source (the queue glob is matched against these)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in sources:
                pipe.hkeys(queues_key(source))
            replies = await pipe.execute() if sources else []
        return {source: sorted(names.text(q) for q in found) for source, found in zip(sources, replies, strict=True)}
