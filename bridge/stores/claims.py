"""Claim bookkeeping: who holds which entry, who is alive, which entries are suspects.

Keys (docs/design.md, section 2 "Every key", 2b and 3b; names defined in `bridge.stores.keys`):

    dlq_bridge:processing:<ref>:<consumer>  list    a list DLQ's entries this consumer claimed
    dlq_bridge:inflight:<ref>:<consumer>    list    a kind record's raw bytes while this consumer holds it
    dlq_bridge:claims:<ref>:<digest>        string  suspect mark of an entry; counts its solo deaths (7 days)
    dlq_bridge:solo:<consumer>              string  `<digest><source key>`: the suspect run alone (7 days)
    dlq_bridge:consumer:<consumer>          string  heartbeat `{"host","pid","at","version","reads"}`
                                                    (`heartbeat_ttl_s`; bridge.stores.fleet reads it)

The sources (`bridge.sources.source`, `bridge.sources.redis_list`, `bridge.sources.kind_port`) keep
their scripts that move entries between a DLQ and a processing list; they take the key names from
here. Everything else that reads or writes these keys goes through `ClaimStore`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence

import redis.asyncio as redis

from bridge.core import names
from bridge.stores import keys
from bridge.stores.keys import PROCESSING_MATCH, ProcessingKey, parse_processing

__all__ = [
    "CLAIMS_TTL_S", "PROCESSING_MATCH", "ClaimStore", "ProcessingKey", "claims_key", "inflight_key",
    "is_bridge_key", "own_processing_match", "parse_processing", "processing_depths", "processing_key",
]

CLAIMS_TTL_S = 7 * 24 * 3600
# KEYS: in-flight list, archive, claim counter. ARGV: raw entry, archive cap.
FINISH_LUA = """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
redis.call('DEL', KEYS[3])
return 1
"""
# KEYS: an in-flight list. Returns its entries and deletes it (a dead consumer's records).
DROP_LUA = """
local held = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return held
"""


# --- key names -----------------------------------------------------------------------------


def processing_key(source_key: str, consumer: str) -> str:
    """The processing list of `consumer` for the list DLQ `source_key`."""
    return keys.processing(source_key, consumer)


def own_processing_match(consumer: str) -> str:
    """A SCAN pattern for the processing lists of `consumer` (a superset: parse each key found)."""
    return f"{keys.PREFIX}:processing:*:{consumer}"


def inflight_key(source_name: str, consumer: str) -> str:
    """The in-flight list of `consumer` for the kind source `source_name`."""
    return keys.inflight(source_name, consumer)


def claims_key(source_key: str, digest: str) -> str:
    """The suspect counter of one entry (by raw digest), in the source's slot."""
    return keys.claims(source_key, digest)


def is_bridge_key(name: str) -> bool:
    """True for a key of the bridge's own (`dlq_bridge:…`), never a DLQ however it is matched."""
    return name.startswith(keys.PREFIX + ":")


def _glob_escaped(text: str) -> str:
    """`text` as a literal SCAN pattern (a source name may hold glob characters)."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


# --- the store -----------------------------------------------------------------------------


class ClaimStore:
    """Reads and writes the claim bookkeeping of one Redis (see module doc); errors propagate."""

    def __init__(self, client: redis.Redis, announce: Mapping[str, object] | None = None) -> None:
        self._redis = client
        self._announce = dict(announce or {})  # what the heartbeat says beside host, pid, at (bridge.stores.fleet)
        self._finish = client.register_script(FINISH_LUA)
        self._drop = client.register_script(DROP_LUA)

    # in-flight and processing lists
    async def finish(self, inflight: str, source_key: str, raw: bytes, digest: str, archive_max: int) -> bool:
        """Move `raw` from `inflight` to the archive of `source_key` (capped) and clear its counter,
        in one script; False when it was no longer in `inflight`."""
        key_names = [inflight, keys.alerted(source_key), claims_key(source_key, digest)]
        encoded = [names.encode(n) for n in key_names]
        return bool(await self._finish(keys=encoded, args=[raw, archive_max]))

    async def entries(self, key: str) -> list[bytes]:
        """Every raw entry of one in-flight or processing list."""
        return [names.as_bytes(raw) for raw in await self._redis.lrange(names.encode(key), 0, -1)]

    async def push_inflight(self, key: str, raws: Sequence[bytes]) -> None:
        await self._redis.lpush(names.encode(key), *raws)

    async def remove_inflight(self, key: str, raw: bytes) -> bool:
        """Take one entry out of an in-flight list (the newest copy)."""
        return bool(await self._redis.lrem(names.encode(key), -1, raw))  # type: ignore[arg-type]

    async def drop_inflight(self, key: str) -> list[bytes]:
        """Empty an in-flight list in one script; the raw entries it held."""
        return [names.as_bytes(raw) for raw in await self._drop(keys=[names.encode(key)])]

    async def inflight_lists(self, source_name: str) -> AsyncIterator[tuple[str, str]]:
        """(key, consumer) of every in-flight list of the kind source `source_name`, of any consumer."""
        head = inflight_key(source_name, "")
        async for raw_key in self._redis.scan_iter(match=_glob_escaped(head) + "*", count=1000, _type="list"):
            key = names.decode(raw_key)
            consumer = key[len(head):]
            if key.startswith(head) and names.CONSUMER_ID_RE.match(consumer):
                yield key, consumer

    async def processing_lists(self, match: str = PROCESSING_MATCH) -> AsyncIterator[tuple[str, ProcessingKey]]:
        """(key, parsed) of every processing list whose key matches `match` and parses."""
        async for raw_key in self._redis.scan_iter(match=match, count=1000, _type="list"):
            key = names.decode(raw_key)
            parsed = parse_processing(key)
            if parsed is not None:
                yield key, parsed

    # suspect counters
    async def marks(self, source_key: str, digests: Sequence[str]) -> list[tuple[int, bool]]:
        """(solo deaths, suspect) per entry: one MGET of their claim counters (the source's slot)."""
        if not digests:
            return []
        counters = await self._redis.mget([names.encode(claims_key(source_key, d)) for d in digests])
        return [(int(n or 0), n is not None) for n in counters]

    async def count_deaths(self, source_key: str, deaths: Sequence[tuple[str, int]]) -> None:
        """Mark each (digest, deaths) entry a suspect, adding `deaths` to its counter: one pipeline."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for digest, count in deaths:
                counter = names.encode(claims_key(source_key, digest))
                pipe.incrby(counter, count)
                pipe.expire(counter, CLAIMS_TTL_S)
            await pipe.execute()

    # solo notes
    async def note_solo(self, consumer: str, digest: str, source_key: str) -> None:
        """`consumer` runs this suspect alone now: a death before `drop_solo` is held against it."""
        await self._redis.set(keys.solo(consumer), digest.encode() + names.encode(source_key), ex=CLAIMS_TTL_S)

    async def drop_solo(self, consumer: str) -> None:
        await self._redis.delete(keys.solo(consumer))

    async def take_solo(self, consumer: str) -> tuple[str, str] | None:
        """(digest, source key) of the suspect `consumer` ran alone, read and deleted; None if none."""
        note = await self._redis.getdel(names.encode(keys.solo(consumer)))
        if not note:
            return None
        alone = names.as_bytes(note)
        return alone[:16].decode("ascii", "replace"), names.decode(alone[16:])

    # heartbeats
    async def beat(self, consumer: str, ttl_s: int) -> None:
        """`consumer` is alive for `ttl_s` more seconds."""
        info = {"host": socket.gethostname(), "pid": os.getpid(), "at": time.time(), **self._announce}
        await self._redis.set(keys.heartbeat(consumer), json.dumps(info), ex=ttl_s)

    async def drop_heartbeat(self, consumer: str) -> None:
        await self._redis.delete(keys.heartbeat(consumer))

    async def alive(self, consumer: str) -> bool:
        return bool(await self._redis.exists(keys.heartbeat(consumer)))


async def processing_depths(client: redis.Redis, count: int = 1000) -> dict[str, int]:
    """Source → entries claimed and not finished, over every consumer's processing list (SCAN, LLEN)."""
    found = [key async for key in client.scan_iter(match=keys.PROCESSING_MATCH, count=count, _type="list")]
    processing: dict[str, int] = defaultdict(int)
    for key in sorted({k.decode("utf-8", errors="replace") for k in found}):
        parsed = keys.parse_processing(key)
        if parsed is not None:
            processing[parsed.source_key] += int(await client.llen(key))
    return dict(processing)
