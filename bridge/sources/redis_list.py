"""Redis list DLQs (`dead_letter:<queue>`), claimed with atomic moves.

Claim:   LMOVE/BLMOVE <dlq> <processing> RIGHT LEFT
Finish:  one Lua script: LREM processing → LPUSH archive → LTRIM archive
Return:  LMOVE <processing> <dlq> LEFT RIGHT, one entry at a time

Each step is one atomic command, so an entry is always in its DLQ, a
processing list or the archive, whenever the process dies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator

import redis.asyncio as redis

from bridge import keys
from bridge.settings import SourcesSettings
from bridge.sources.base import Claimed

log = logging.getLogger(__name__)

FINISH_LUA = """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
return 1
"""
RELEASE_LUA = """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 1 then redis.call('RPUSH', KEYS[2], ARGV[1]) end
return removed
"""
IDLE_BLOCK_SINGLE_S = 1.0
STICKY_S = 600.0


class RedisListSource:
    """All `dead_letter:*` lists, consumed fairly by one consumer id."""

    def __init__(self, client: redis.Redis, settings: SourcesSettings, consumer: str) -> None:
        self._redis = client
        self._settings = settings
        self.consumer = consumer
        self._sources: list[str] = []
        self._last_seen: dict[str, float] = {}
        self._cursor = 0
        self._finish = client.register_script(FINISH_LUA)
        self._release = client.register_script(RELEASE_LUA)

    @property
    def sources(self) -> list[str]:
        return list(self._sources)

    async def rescan(self) -> list[str]:
        """Discover DLQ lists by SCAN (never KEYS); keeps rotation order stable.

        Redis deletes a list when it empties, so a drained DLQ stays in rotation for
        `STICKY_S` after it was last seen: its next dead letter is claimed at once
        instead of waiting for a rescan.
        """
        now = time.monotonic()
        async for key in self._redis.scan_iter(match=self._settings.match, count=1000, _type="list"):
            name = key.decode("utf-8", errors="replace")
            if not name.startswith(keys.PREFIX + ":"):
                self._last_seen[name] = now
        self._last_seen = {k: t for k, t in self._last_seen.items() if now - t < STICKY_S}
        kept = [s for s in self._sources if s in self._last_seen]
        self._sources = kept + sorted(set(self._last_seen) - set(kept))
        return self.sources

    async def claim(self) -> Claimed | None:
        """Next entry, rotating over DLQs so a busy one cannot starve the others."""
        count = len(self._sources)
        for _ in range(count):
            source = self._next_source()
            raw = await self._redis.lmove(source, keys.processing(source, self.consumer), "RIGHT", "LEFT")
            if raw is not None:
                return Claimed(source, as_bytes(raw), time.monotonic())
        if count == 0:  # no DLQ yet: pause, or the claim loop spins a core until one appears
            await asyncio.sleep(self._settings.poll_interval_s)
            return None
        return await self._block_on(self._next_source(), count)

    async def _block_on(self, source: str, count: int) -> Claimed | None:
        timeout = IDLE_BLOCK_SINGLE_S if count == 1 else self._settings.poll_interval_s
        raw = await self._redis.blmove(
            source,
            keys.processing(source, self.consumer),
            timeout,  # type: ignore[arg-type]  # Redis ≥ 6 takes fractional seconds
            "RIGHT",
            "LEFT",
        )
        return None if raw is None else Claimed(source, as_bytes(raw), time.monotonic())

    def _next_source(self) -> str:
        self._cursor = (self._cursor + 1) % len(self._sources)
        return self._sources[self._cursor]

    async def finish(self, claimed: Claimed) -> bool:
        """Archive the entry; False when it was no longer in our processing list."""
        done = await self._finish(
            keys=[keys.processing(claimed.source_key, self.consumer), keys.alerted(claimed.source_key)],
            args=[claimed.raw, self._settings.archive_max],
        )
        return bool(done)

    async def own_entries(self) -> Counter[tuple[str, bytes]]:
        """Everything in this consumer's processing lists, as (source key, raw) counts."""
        found: Counter[tuple[str, bytes]] = Counter()
        async for key in self._processing_keys(f"{keys.PREFIX}:processing:*:{self.consumer}"):
            parsed = keys.parse_processing(key)
            if parsed is not None and parsed.consumer == self.consumer:
                for raw in await self._redis.lrange(key, 0, -1):
                    found[(parsed.source_key, as_bytes(raw))] += 1
        return found

    async def release(self, source_key: str, raw: bytes) -> bool:
        """Atomically return one claimed entry to the right end of its DLQ."""
        moved = await self._release(keys=[keys.processing(source_key, self.consumer), source_key], args=[raw])
        return bool(moved)

    async def recover_own(self) -> int:
        """Return everything in this consumer's processing lists to the DLQs."""
        moved = 0
        async for key in self._processing_keys():
            parsed = keys.parse_processing(key)
            if parsed is not None and parsed.consumer == self.consumer:
                moved += await return_entries(self._redis, key, parsed.source_key)
        return moved

    async def reap(self) -> int:
        """Return entries of consumers whose heartbeat expired (even never-seen ids)."""
        moved = 0
        async for key in self._processing_keys():
            parsed = keys.parse_processing(key)
            if parsed is None or parsed.consumer == self.consumer:
                continue
            if not await self._redis.exists(keys.heartbeat(parsed.consumer)):
                count = await return_entries(self._redis, key, parsed.source_key)
                if count:
                    log.warning("reaped %d entries of dead consumer %s", count, parsed.consumer)
                moved += count
        return moved

    async def _processing_keys(self, match: str = keys.PROCESSING_MATCH) -> AsyncIterator[str]:
        async for key in self._redis.scan_iter(match=match, count=1000, _type="list"):
            yield key.decode("utf-8", errors="replace")

    async def heartbeat(self) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()}
        await self._redis.set(keys.heartbeat(self.consumer), json.dumps(info), ex=self._settings.heartbeat_ttl_s)

    async def drop_heartbeat(self) -> None:
        await self._redis.delete(keys.heartbeat(self.consumer))

    async def depths(self) -> dict[str, int]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for source in self._sources:
                pipe.llen(source)
            lengths = await pipe.execute()
        return dict(zip(self._sources, (int(n) for n in lengths), strict=True))


def as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


async def return_entries(client: redis.Redis, processing_key: str, source_key: str) -> int:
    """Move a processing list back to the right end of its DLQ, oldest claim last-out."""
    moved = 0
    while await client.lmove(processing_key, source_key, "LEFT", "RIGHT") is not None:
        moved += 1
    return moved
