"""Redis list DLQs (`dead_letter:<queue>`), claimed with atomic moves.

Claim:   one Lua script: up to n × LMOVE <dlq> <processing> RIGHT LEFT (a batch), then one
         MGET of the batch's claim counters (both on the source's slot); BLMOVE when idle
Count:   the entries of a dead consumer come back as suspects (their counter key set); the death
         counts against the one suspect it ran alone, if any (`bridge.sources.source.return_held`)
Finish:  the hand-off's script (`bridge.stores.handoff`): LREM processing → LPUSH archive → outbox → DEL counter
Return:  LMOVE <processing> <dlq> LEFT RIGHT, one entry at a time

Each step is one atomic command, so an entry is always in its DLQ, a
processing list, the archive or the quarantine, whenever the process dies.
Every script touches keys of the source's hash slot only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping

import redis.asyncio as redis

from bridge.config.sources import ListSourcesSettings
from bridge.core import names
from bridge.core.claimed import Claimed
from bridge.sources.source import Held, Source
from bridge.sources.tracking import SourceTracker
from bridge.stores.claims import is_bridge_key, own_processing_match, processing_key

log = logging.getLogger(__name__)

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


class RedisListSource(Source):
    """All `dead_letter:*` lists, consumed fairly by one consumer id.

    Key names are kept byte-exact: text decoded with `surrogateescape`
    (`names.decode`), turned back into bytes (`names.encode`) for every Redis call,
    and shown through `names.display`.
    """

    def __init__(
        self, client: redis.Redis, settings: ListSourcesSettings, consumer: str,
        *, announce: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client, consumer, settings.heartbeat_ttl_s, settings.archive_max, announce=announce)
        self._settings = settings
        self._tracker = SourceTracker(settings.max_sources, settings.sticky_s)
        self._scan_lock = asyncio.Lock()
        self._last_scan = 0.0
        self._release_script = client.register_script(RELEASE_LUA)
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
                name = names.decode(key)
                if not is_bridge_key(name):
                    scan.see(name)
            self._last_scan = time.monotonic()
            self._tracker.end_scan(scan, self._last_scan)
        return self.sources

    async def _claim(self, limit: int) -> list[Claimed]:
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
        processing = names.encode(processing_key(source, self.consumer))
        raws = await self._claim_many(keys=[names.encode(source), processing], args=[limit])
        return [names.as_bytes(raw) for raw in raws]

    async def _claimed_many(self, source: str, raws: list[bytes]) -> list[Claimed]:
        """The claims, each with how often it was returned after its consumer died (one MGET, one slot)."""
        claimed_at = time.monotonic()
        self._tracker.heat(source, claimed_at)
        marks = await self._marked(source, raws)
        return [Claimed(source, raw, claimed_at, n, suspect) for raw, (n, suspect) in zip(raws, marks, strict=True)]

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
            names.encode(source),  # type: ignore[arg-type]  # redis-py takes bytes keys
            names.encode(processing_key(source, self.consumer)),  # type: ignore[arg-type]
            timeout,  # type: ignore[arg-type]  # Redis ≥ 6 takes fractional seconds
            "RIGHT",
            "LEFT",
        )
        return None if raw is None else await self._claimed(source, raw)

    async def _move(self, source: str) -> bytes | str | None:
        processing = names.encode(processing_key(source, self.consumer))
        raw: bytes | str | None = await self._redis.lmove(
            names.encode(source), processing, "RIGHT", "LEFT"  # type: ignore[arg-type]  # bytes keys
        )
        return raw

    async def _claimed(self, source: str, value: bytes | str) -> Claimed:
        """The claim, with its suspect mark and solo deaths (`return_held`)."""
        return (await self._claimed_many(source, [names.as_bytes(value)]))[0]

    def _inflight_key(self, source_key: str) -> str:
        return processing_key(source_key, self.consumer)

    async def _release(self, source_key: str, raw: bytes) -> bool:
        """Atomically return one claimed entry to the right end of its DLQ."""
        key_names = [processing_key(source_key, self.consumer), source_key]
        moved = await self._release_script(keys=[names.encode(n) for n in key_names], args=[raw])
        return bool(moved)

    async def _held_lists(self) -> AsyncIterator[Held]:
        async for key, parsed in self._claims.processing_lists():
            yield Held(parsed.consumer, key, parsed.source_key)

    async def _own_lists(self) -> AsyncIterator[Held]:
        async for key, parsed in self._claims.processing_lists(own_processing_match(self.consumer)):
            if parsed.consumer == self.consumer:
                yield Held(parsed.consumer, key, parsed.source_key)

    async def _give_back(self, held: Held) -> list[bytes]:
        return await move_back(self._redis, held.key, held.source_key)

    async def drained(self) -> bool:
        await self.rescan()
        return sum((await self.depths()).values()) == 0 and not self.waiting()

    async def depths(self) -> dict[str, int]:
        """Depth of every tracked DLQ; only lists the last scan found non-empty are asked."""
        present = [s for s in self._tracker.sources if s in self._tracker.present]
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in present:
                pipe.llen(names.encode(source))
            lengths = await pipe.execute() if present else []
        depths = dict.fromkeys(self._tracker.sources, 0)
        depths.update(zip(present, (int(n) for n in lengths), strict=True))
        return depths


async def move_back(client: redis.Redis, processing_key: str, source_key: str) -> list[bytes]:
    """Every entry of a processing list, back to the right end of its DLQ (oldest claim last-out)."""
    moved: list[bytes] = []
    source, processing = names.encode(source_key), names.encode(processing_key)
    while (raw := await client.lmove(processing, source, "LEFT", "RIGHT")) is not None:  # type: ignore[arg-type]
        moved.append(names.as_bytes(raw))
    return moved
