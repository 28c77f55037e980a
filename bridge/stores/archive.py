"""Reads of a source's archive (`dlq_bridge:alerted:<ref>`), entry records (`dlq_bridge:entries:<ref>`
+ `:index`) and minute counts (`dlq_bridge:stats:<ref>:<minute>`); docs/design.md, sections 2 and 6b.

The hand-off script (bridge.stores.handoff) writes all of them; the console and the commands
read them here. `archive_key` is for what needs the name itself: a redrive `Plan` (its Lua
script moves entries out of the archive; bridge.stores.requeue), `EXISTS`, and `peek`'s listing.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis
from pydantic import ValidationError
from redis.asyncio.client import Pipeline

from bridge.core import names
from bridge.core.models import Alert
from bridge.intake.envelope import raw_digest
from bridge.stores import keys

STATS_BUCKET_S = keys.STATS_BUCKET_S  # one minute's counts per bucket
FIND_CHUNK = 500


@dataclass(frozen=True)
class Record:
    """One parsed entry record (see bridge.stores.handoff.entry_record): the alert is embedded, or inside
    the outbox parcel the hand-off script appended."""

    ms: int
    item: str
    sinks: list[str]
    silenced: dict[str, str]
    quarantined: bool
    alert: Alert

    @classmethod
    def parse(cls, raw: bytes | str | None) -> Record | None:
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            alert = (Alert.model_validate(data["alert"]) if "alert" in data
                     else Alert.model_validate_json(data["parcel"]["alert"]))
            return cls(int(data["ms"]), str(data["item"]), [str(s) for s in data["sinks"]],
                       {str(k): str(v) for k, v in data["silenced"].items()}, bool(data.get("quarantined")), alert)
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
            return None


def archive_key(source: str) -> str:
    """The archive list of `source` (entries already alerted, newest left)."""
    return keys.alerted(source)


def quarantine_key(source: str) -> str:
    """The quarantine list of `source` (entries set aside unparsed, byte for byte; redrive --quarantine)."""
    return keys.quarantine(source)


def minute_of(epoch_s: float) -> int:
    """The stats bucket holding `epoch_s`."""
    return int(epoch_s) // STATS_BUCKET_S


class Archive:
    """Read side of the archives, entry records and minute counts of every list and kind source."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    # --- which sources have an archive -------------------------------------------------------

    async def archived_sources(self, count: int) -> set[str]:
        """Every source with an archive (one SCAN, TYPE list; names exact to the byte)."""
        found = set()
        async for key in self._redis.scan_iter(match=keys.ALERTED_MATCH, count=count, _type="list"):
            source = keys.parse_alerted(names.decode(key))
            if source is not None:
                found.add(source)
        return found

    async def handed_off(self, now: float, minutes: int = 60, count: int = 1000) -> tuple[int, int]:
        """(sources with an archive, entries they handed off in the last `minutes`): the current rate."""
        sources = sorted(await self.archived_sources(count))
        here = minute_of(now)
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in sources:
                self.queue_stats(pipe, source, range(here - minutes + 1, here + 1))
            buckets = await pipe.execute() if sources else []
        return len(sources), sum(int(v) for b in buckets for k, v in b.items() if names.text(k) == "alerted")

    async def depths(self, count: int = 1000) -> dict[str, int]:
        """Source → archive length (for `peek`: names decoded for display, in key order)."""
        found = [key async for key in self._redis.scan_iter(match=keys.ALERTED_MATCH, count=count, _type="list")]
        archived = {}
        for key in sorted({k.decode("utf-8", errors="replace") for k in found}):
            source = keys.parse_alerted(key)
            if source is not None:
                archived[source] = int(await self._redis.llen(key))
        return archived

    async def totals(self, sources: Sequence[str]) -> tuple[int, int]:
        """(entries archived, distinct entries indexed) over `sources`: identical bytes parked again by a
        repeated run are two archive entries but one record (search shows them once)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in sources:
                pipe.llen(names.encode(keys.alerted(source)))
                pipe.zcard(names.encode(keys.entry_index(source)))
            replies = await pipe.execute() if sources else []
        return sum(int(n) for n in replies[0::2]), sum(int(n) for n in replies[1::2])

    # --- one archive -----------------------------------------------------------------------------

    async def page(self, source: str, offset: int, limit: int) -> tuple[int, list[Any]]:
        """(length, `limit` entries from `offset`, newest first) of the archive, in one round trip."""
        archive = names.encode(keys.alerted(source))
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.llen(archive)
            pipe.lrange(archive, offset, offset + limit - 1)
            total, raws = await pipe.execute()
        return int(total), list(raws)

    async def find_raws(
        self, source: str, entry_ids: Collection[str], limit: int | None, chunk: int = FIND_CHUNK
    ) -> dict[str, bytes]:
        """digest → archived bytes of `entry_ids` (one pass, newest first, `chunk` entries per LRANGE,
        at most `limit` read (None: all); the first found of a digest wins; stops once all are found)."""
        archive, wanted, found = names.encode(keys.alerted(source)), set(entry_ids), dict[str, bytes]()
        start = 0
        while (limit is None or start < limit) and wanted:
            raws = await self._redis.lrange(archive, start, start + chunk - 1)
            for raw in raws:
                data = raw if isinstance(raw, bytes) else str(raw).encode()
                digest = raw_digest(data)
                if digest in wanted:
                    wanted.discard(digest)
                    found[digest] = data
            if len(raws) < chunk:
                break
            start += chunk
        return found

    async def list_depths(self, source: str) -> tuple[int, int, int]:
        """(archive, DLQ, quarantine list) lengths of a list source, in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in (keys.alerted(source), source, keys.quarantine(source)):
                pipe.llen(names.encode(key))
            archived, dead, quarantined = await pipe.execute()
        return int(archived), int(dead), int(quarantined)

    async def discard(self, source: str, raws: Sequence[bytes]) -> list[int]:
        """LREM each of these exact entries (once) from the archive; how many each removed (one pipeline)."""
        archive = names.encode(keys.alerted(source))
        async with self._redis.pipeline(transaction=False) as pipe:
            for raw in raws:
                pipe.lrem(archive, 1, raw)  # type: ignore[arg-type]  # bytes are fine
            return [int(n) for n in await pipe.execute()]

    # --- entry records ---------------------------------------------------------------------------

    async def record(self, source: str, digest: str) -> Any:
        """The stored record of one entry (raw JSON), None when unknown."""
        return await self._redis.hget(names.encode(keys.entry_records(source)), digest)

    async def records(self, source: str, digests: Sequence[str]) -> list[Any]:
        """The stored records of `digests` (one HMGET; None where unknown)."""
        return list(await self._redis.hmget(names.encode(keys.entry_records(source)), digests))

    @staticmethod
    def queue_records(pipe: Pipeline, source: str, digests: Sequence[str]) -> None:
        """`records` queued on a pipeline (one HMGET reply)."""
        pipe.hmget(names.encode(keys.entry_records(source)), digests)

    async def scores(self, source: str, digests: Sequence[str]) -> list[Any]:
        """Hand-off ms of `digests` in the record index (None where not indexed)."""
        return list(await self._redis.zmscore(names.encode(keys.entry_index(source)), list(digests)))

    # --- depths and minute counts (the sources table) ---------------------------------------------

    @staticmethod
    def queue_depths(pipe: Pipeline, source: str, *, dlq_depth: bool) -> None:
        """Two LLEN replies: the DLQ `source` itself (`dlq_depth`; else the archive again, a placeholder:
        a cluster pipeline refuses ECHO), then the archive."""
        pipe.llen(names.encode(source if dlq_depth else keys.alerted(source)))
        pipe.llen(names.encode(keys.alerted(source)))

    @staticmethod
    def queue_stats(pipe: Pipeline, source: str, minutes: range) -> None:
        """One HGETALL reply per minute: that minute's hand-off counts (`alerted`, per summary source)."""
        for minute in minutes:
            pipe.hgetall(names.encode(keys.handoff_stats(source, minute)))


QUARANTINE_MATCH = keys.QUARANTINE_MATCH


async def quarantine_depth(client: redis.Redis) -> int:
    """Entries in every `dlq_bridge:quarantine:*` list (never trimmed: an operator empties them)."""
    total = 0
    async for key in client.scan_iter(match=QUARANTINE_MATCH, count=1000, _type="list"):
        total += int(await client.llen(key))
    return total
