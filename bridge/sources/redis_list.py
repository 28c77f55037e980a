"""Redis list DLQs (`dead_letter:<queue>`), claimed with atomic moves.

Claim:   one Lua script: up to n × LMOVE <dlq> <processing> RIGHT LEFT (a batch), then one
         MGET of the batch's claim counters (both on the source's slot); BLMOVE when idle
Count:   the entries of a dead consumer come back as suspects (their counter key set); the death
         counts against the one suspect it ran alone, if any (`return_held`)
Finish:  one Lua script: LREM processing → LPUSH archive → LTRIM archive → DEL counter
Quarantine: one Lua script: LREM processing → LPUSH quarantine → DEL counter
Return:  LMOVE <processing> <dlq> LEFT RIGHT, one entry at a time

Each step is one atomic command, so an entry is always in its DLQ, a
processing list, the archive or the quarantine, whenever the process dies.
Every script touches keys of the source's hash slot only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable

import redis.asyncio as redis

from bridge import keys
from bridge.config.sources import ListSourcesSettings
from bridge.sources.base import Claimed, entry_digest
from bridge.sources.tracking import SourceTracker

log = logging.getLogger(__name__)

FINISH_LUA = """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
redis.call('DEL', KEYS[3])
return 1
"""
RELEASE_LUA = """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 1 then redis.call('RPUSH', KEYS[2], ARGV[1]) end
return removed
"""
CLAIM_MANY_LUA = """
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local raw = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not raw then break end
  out[i] = raw
end
return out
"""
IDLE_BLOCK_SINGLE_S = 1.0
PROBE_BATCH = 8  # cold sources tried with LMOVE per idle round, besides the one blocked on
MIN_RESCAN_GAP_S = 0.25  # an idle claim loop rescans at most this often while DLQs wait for a turn
CLAIMS_TTL_S = 7 * 24 * 3600


class RedisListSource:
    """All `dead_letter:*` lists, consumed fairly by one consumer id.

    Key names are kept byte-exact: text decoded with `surrogateescape`
    (`keys.decode`), turned back into bytes (`keys.encode`) for every Redis call,
    and shown through `keys.display`.
    """

    def __init__(self, client: redis.Redis, settings: ListSourcesSettings, consumer: str) -> None:
        self._redis = client
        self._settings = settings
        self.consumer = consumer
        self._tracker = SourceTracker(settings.max_sources, settings.sticky_s)
        self._scan_lock = asyncio.Lock()
        self._last_scan = 0.0
        self._finish = client.register_script(FINISH_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._claim_many = client.register_script(CLAIM_MANY_LUA)

    @property
    def sources(self) -> list[str]:
        return self._tracker.sources

    def waiting(self) -> int:
        """Non-empty DLQs found beyond `max_sources`, waiting for their turn."""
        return self._tracker.waiting

    async def rescan(self) -> list[str]:
        """Discover DLQ lists by SCAN (never KEYS); see `bridge.sources.tracking`.

        Redis deletes a list when it empties, so a drained DLQ stays tracked for
        `sources.sticky_s` after it was last seen: its next dead letter is claimed
        soon without waiting for a rescan.
        """
        async with self._scan_lock:
            scan = self._tracker.begin_scan()
            async for key in self._redis.scan_iter(match=self._settings.match, count=1000, _type="list"):
                name = keys.decode(key)
                if not name.startswith(keys.PREFIX + ":"):
                    scan.see(name)
            self._last_scan = time.monotonic()
            self._tracker.end_scan(scan, self._last_scan)
        return self.sources

    async def claim(self) -> Claimed | None:
        """Next entry (see `claim_batch`)."""
        batch = await self.claim_batch(1)
        return batch[0] if batch else None

    async def claim_batch(self, limit: int) -> list[Claimed]:
        """Up to `limit` entries of one DLQ: hot DLQs in turn (a busy one cannot starve the others),
        then idle work (one entry). Empty when every DLQ is."""
        tracker = self._tracker
        for _ in range(tracker.hot_count):
            if not tracker.hot_count:  # a rescan rotated sources out meanwhile
                break
            source = tracker.next_hot()
            raws = await self._move_many(source, limit)
            if raws:
                return await self._claimed_many(source, raws)
            tracker.cool(source)
        if tracker.waiting and time.monotonic() - self._last_scan >= MIN_RESCAN_GAP_S:
            await self.rescan()  # drained sources made room for DLQs waiting their turn
            if tracker.hot_count:
                return []
        idle = await self._idle_claim()
        return [] if idle is None else [idle]

    async def _move_many(self, source: str, limit: int) -> list[bytes]:
        """Up to `limit` atomic moves into our processing list, one script call."""
        processing = keys.encode(keys.processing(source, self.consumer))
        raws = await self._claim_many(keys=[keys.encode(source), processing], args=[limit])
        return [as_bytes(raw) for raw in raws]

    async def _claimed_many(self, source: str, raws: list[bytes]) -> list[Claimed]:
        """The claims, each with how often it was returned after its consumer died (one MGET, one slot)."""
        claimed_at = time.monotonic()
        self._tracker.heat(source, claimed_at)
        counters = await self._redis.mget([keys.encode(keys.claims(source, entry_digest(raw))) for raw in raws])
        return [
            Claimed(source, raw, claimed_at, int(n or 0), n is not None) for raw, n in zip(raws, counters, strict=True)
        ]

    async def _idle_claim(self) -> Claimed | None:
        """No hot DLQ: probe a few cold ones, then block briefly on the next."""
        tracker = self._tracker
        count = tracker.cold_count()
        if count == 0:  # no DLQ yet: pause, or the claim loop spins a core until one appears
            await asyncio.sleep(self._settings.poll_interval_s)
            return None
        for source in tracker.probe_batch(PROBE_BATCH):
            raw = await self._move(source)
            if raw is not None:
                return await self._claimed(source, raw)
        if not tracker.cold_count():  # a rescan rotated sources out meanwhile
            return None
        source = tracker.next_cold()
        timeout = IDLE_BLOCK_SINGLE_S if count == 1 else self._settings.poll_interval_s
        raw = await self._redis.blmove(
            keys.encode(source),  # type: ignore[arg-type]  # redis-py takes bytes keys
            keys.encode(keys.processing(source, self.consumer)),  # type: ignore[arg-type]
            timeout,  # type: ignore[arg-type]  # Redis ≥ 6 takes fractional seconds
            "RIGHT",
            "LEFT",
        )
        return None if raw is None else await self._claimed(source, raw)

    async def _move(self, source: str) -> bytes | str | None:
        processing = keys.encode(keys.processing(source, self.consumer))
        raw: bytes | str | None = await self._redis.lmove(
            keys.encode(source), processing, "RIGHT", "LEFT"  # type: ignore[arg-type]  # bytes keys
        )
        return raw

    async def _claimed(self, source: str, value: bytes | str) -> Claimed:
        """The claim, with its suspect mark and solo deaths (`return_held`)."""
        raw = as_bytes(value)
        claimed_at = time.monotonic()
        self._tracker.heat(source, claimed_at)
        deaths = await self._redis.get(keys.encode(keys.claims(source, entry_digest(raw))))
        return Claimed(source, raw, claimed_at, int(deaths or 0), deaths is not None)

    async def finish(self, claimed: Claimed) -> bool:
        """Archive the entry; False when it was no longer in our processing list."""
        names = self._entry_keys(claimed, keys.alerted)
        done = await self._finish(keys=names, args=[claimed.raw, self._settings.archive_max])
        return bool(done)

    def _entry_keys(self, claimed: Claimed, target: Callable[[str], str]) -> list[bytes]:
        source = claimed.source_key
        names = [keys.processing(source, self.consumer), target(source), keys.claims(source, entry_digest(claimed.raw))]
        return [keys.encode(name) for name in names]

    async def own_entries(self) -> Counter[tuple[str, bytes]]:
        """Everything in this consumer's processing lists, as (source key, raw) counts."""
        found: Counter[tuple[str, bytes]] = Counter()
        async for key in self._processing_keys(f"{keys.PREFIX}:processing:*:{self.consumer}"):
            parsed = keys.parse_processing(key)
            if parsed is not None and parsed.consumer == self.consumer:
                for raw in await self._redis.lrange(keys.encode(key), 0, -1):
                    found[(parsed.source_key, as_bytes(raw))] += 1
        return found

    async def release(self, source_key: str, raw: bytes) -> bool:
        """Atomically return one claimed entry to the right end of its DLQ."""
        names = [keys.processing(source_key, self.consumer), source_key]
        moved = await self._release(keys=[keys.encode(n) for n in names], args=[raw])
        return bool(moved)

    async def recover_own(self) -> int:
        """Return everything in this consumer's processing lists to the DLQs (a previous run died)."""
        lists = [(key, source) for consumer, key, source in await self._held_lists() if consumer == self.consumer]
        return await return_held(self._redis, self.consumer, lists)

    async def reap(self) -> int:
        """Return entries of consumers whose heartbeat expired (even never-seen ids)."""
        by_consumer: dict[str, list[tuple[str, str]]] = {}
        for consumer, key, source in await self._held_lists():
            if consumer != self.consumer:
                by_consumer.setdefault(consumer, []).append((key, source))
        moved = 0
        for consumer, lists in by_consumer.items():
            if not await self._redis.exists(keys.heartbeat(consumer)):
                count = await return_held(self._redis, consumer, lists)
                if count:
                    log.warning("reaped %d entries of dead consumer %s", count, consumer)
                moved += count
        return moved

    async def _held_lists(self) -> list[tuple[str, str, str]]:
        """(consumer, processing key, source key) of every processing list."""
        found = []
        async for key in self._processing_keys():
            parsed = keys.parse_processing(key)
            if parsed is not None:
                found.append((parsed.consumer, key, parsed.source_key))
        return found

    async def run_alone(self, claimed: Claimed) -> None:
        """Note the suspect this consumer runs alone: a death before `ran_alone` is held against it."""
        note = claimed.digest.encode() + keys.encode(claimed.source_key)
        await self._redis.set(keys.solo(self.consumer), note, ex=CLAIMS_TTL_S)

    async def ran_alone(self) -> None:
        await self._redis.delete(keys.solo(self.consumer))

    async def _processing_keys(self, match: str = keys.PROCESSING_MATCH) -> AsyncIterator[str]:
        async for key in self._redis.scan_iter(match=match, count=1000, _type="list"):
            yield keys.decode(key)

    async def heartbeat(self) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()}
        await self._redis.set(keys.heartbeat(self.consumer), json.dumps(info), ex=self._settings.heartbeat_ttl_s)

    async def drop_heartbeat(self) -> None:
        await self._redis.delete(keys.heartbeat(self.consumer))

    async def depths(self) -> dict[str, int]:
        """Depth of every tracked DLQ; only lists the last scan found non-empty are asked."""
        present = [s for s in self._tracker.sources if s in self._tracker.present]
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in present:
                pipe.llen(keys.encode(source))
            lengths = await pipe.execute() if present else []
        depths = dict.fromkeys(self._tracker.sources, 0)
        depths.update(zip(present, (int(n) for n in lengths), strict=True))
        return depths


def as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


async def return_held(client: redis.Redis, consumer: str, lists: list[tuple[str, str]]) -> int:
    """Return a dead (or stalled) consumer's processing lists (`(processing key, source key)`) to the
    right end of their DLQs, oldest claim last-out, each entry marked a suspect.

    The death is held against one entry at most (its suspect counter, `dlq_bridge:claims:<ref>:<digest>`,
    goes up by one): the suspect the consumer noted it ran alone (`keys.solo`), else the only entry it
    held. Every other entry was a bystander: it is a suspect now, its count unchanged, and runs alone
    next time (docs/design.md, section 3b). The pipeline quarantines an entry once its count reaches
    `sources.quarantine_after`. A crash between the moves and the marks leaves them unmarked (an
    under-count), never an entry lost.
    """
    alone = await client.getdel(keys.encode(keys.solo(consumer)))
    returned: dict[str, list[bytes]] = {}
    for processing_key, source_key in lists:
        returned.setdefault(source_key, []).extend(await _move_back(client, processing_key, source_key))
    total = sum(len(raws) for raws in returned.values())
    convicted = _convicted(as_bytes(alone) if alone else b"", returned, total)
    for source_key, raws in returned.items():
        async with client.pipeline(transaction=False) as pipe:
            for raw in raws:
                counter = keys.encode(keys.claims(source_key, entry_digest(raw)))
                pipe.incrby(counter, 1 if (source_key, raw) == convicted else 0)
                pipe.expire(counter, CLAIMS_TTL_S)
            await pipe.execute()
    return total


def _convicted(alone: bytes, returned: dict[str, list[bytes]], total: int) -> tuple[str, bytes] | None:
    """The entry a death is held against: the noted solo suspect if it was still held, else a lone entry."""
    if alone:
        digest, source_key = alone[:16].decode("ascii", "replace"), keys.decode(alone[16:])
        for raw in returned.get(source_key, []):
            if entry_digest(raw) == digest:
                return source_key, raw
    if total == 1:
        source_key, raws = next((s, r) for s, r in returned.items() if r)
        return source_key, raws[0]
    return None


async def _move_back(client: redis.Redis, processing_key: str, source_key: str) -> list[bytes]:
    moved: list[bytes] = []
    source, processing = keys.encode(source_key), keys.encode(processing_key)
    while (raw := await client.lmove(processing, source, "LEFT", "RIGHT")) is not None:  # type: ignore[arg-type]
        moved.append(as_bytes(raw))
    return moved
