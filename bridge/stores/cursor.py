"""A durable, fleet-wide cursor over a sorted set the bridge must never change.

Watched stores (Sidekiq `dead`, BullMQ `<prefix>:<q>:failed`, RQ `rq:failed:<q>`) are sorted sets
owned by the job system. The bridge remembers how far it got in its own keys, one hash slot per
source (docs/design.md, section 2b):

- the watermark: the highest score finished, plus the ids finished at exactly that score
  (several jobs can die in the same millisecond);
- leases: records claimed by some replica and not finished yet, with an expiry, so a replica
  killed -9 loses nothing (the lease expires and any replica reclaims the record), and two
  replicas never hold the same record at once.

`claim` and `finish` are one Lua script each. Below the watermark nothing is ever handed out
again, so a restart or a second replica sees each dead job once; the producer trimming its set
only removes records the cursor has no further use for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis.asyncio as aioredis

from bridge.core import names
from bridge.stores import keys

# KEYS: cursor, ids, leases, lease_scores. ARGV: id, score, now_ms, lease_ms.
# 1 = leased to the caller; 0 = finished already, or leased to someone else.
_CLAIM = """
local cur = redis.call('HGET', KEYS[1], 'score')
local score = tonumber(ARGV[2])
if cur then
  cur = tonumber(cur)
  if score < cur then return 0 end
  if score == cur and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
end
local expiry = redis.call('ZSCORE', KEYS[3], ARGV[1])
if expiry and tonumber(expiry) > tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[3], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
return 1
"""

# KEYS: cursor, ids, leases, lease_scores. ARGV: id, score. Advances the watermark, drops the lease.
_FINISH = """
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local cur = redis.call('HGET', KEYS[1], 'score')
local score = tonumber(ARGV[2])
if (not cur) or score > tonumber(cur) then
  redis.call('HSET', KEYS[1], 'score', ARGV[2])
  redis.call('DEL', KEYS[2])
  redis.call('SADD', KEYS[2], ARGV[1])
elseif score == tonumber(cur) then
  redis.call('SADD', KEYS[2], ARGV[1])
end
return 1
"""

# KEYS: cursor, ids, leases, lease_scores, held, held_notes. ARGV: id, score, note, max_held.
# `_FINISH`, then the job is held (its alert resolves when it leaves the store); the oldest
# deaths beyond max_held are forgotten.
_FINISH_HOLD = _FINISH.replace("return 1\n", "") + """
redis.call('ZADD', KEYS[5], tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[6], ARGV[1], ARGV[3])
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[4])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[5], 0, over - 1)) do
    redis.call('ZREM', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
  end
end
return 1
"""

# KEYS: held, held_notes, outbox. ARGV: id, score, parcel id ('' = trimmed: forget it), parcel.
# 1 = this caller took the departure; 0 = another replica did, or the job is held at another score.
_DEPART = """
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not held) or tonumber(held) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[3], ARGV[3], ARGV[4]) end
return 1
"""

# KEYS: leases, lease_scores. ARGV: now_ms, lease_ms, limit. Re-leases expired leases to the caller.
# Returns a flat list id, score, id, score ...
_RECLAIM = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(expired) do
  redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or '0'
end
return out
"""


MAX_HELD = 20_000  # held jobs per watched set (about 0.4 KiB each); beyond it the oldest deaths are forgotten


def _score_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Position:
    """Where a record sits in the watched set: its score (as Redis wrote it) and its id."""

    score: str
    member_id: str


class Cursor:
    """One watched store's progress, shared by every replica through the bridge's Redis."""

    def __init__(self, client: aioredis.Redis, source_name: str, *, lease_s: float = 60.0) -> None:
        self._client = client
        self._keys = [
            keys.cursor(source_name),
            keys.cursor_ids(source_name),
            keys.cursor_leases(source_name),
            keys.cursor_lease_scores(source_name),
        ]
        self._held = [keys.cursor_held(source_name), keys.cursor_held_notes(source_name)]
        self.outbox = keys.leave_outbox(source_name)
        self._lease_ms = int(lease_s * 1000)
        self._claim = client.register_script(_CLAIM)
        self._finish = client.register_script(_FINISH)
        self._finish_hold = client.register_script(_FINISH_HOLD)
        self._depart = client.register_script(_DEPART)
        self._reclaim = client.register_script(_RECLAIM)

    async def watermark(self) -> str | None:
        """The highest finished score (as stored), or None before the first finish."""
        value = await self._client.hget(self._keys[0], "score")
        return value.decode() if isinstance(value, bytes) else value

    async def claim(self, position: Position, now_ms: int) -> bool:
        """Lease the record to the caller unless it is finished or leased to another replica."""
        args: list[str | int] = [position.member_id, position.score, now_ms, self._lease_ms]
        return bool(await self._claim(keys=self._keys, args=args))

    async def finish(self, position: Position) -> None:
        """The record is done: it is never claimed again, by anyone."""
        await self._finish(keys=self._keys, args=[position.member_id, position.score])

    async def finish_and_hold(self, position: Position, note: str, max_held: int = MAX_HELD) -> None:
        """`finish`, and hold the job with `note` until it is seen leaving the store (one script)."""
        args: list[str | int] = [position.member_id, position.score, note, max_held]
        await self._finish_hold(keys=self._keys + self._held, args=args)

    async def held_page(self, scan: int, count: int) -> tuple[int, list[Position]]:
        """One ZSCAN page of the held jobs: the next scan cursor (0: a full pass is done) and positions."""
        nxt, rows = await self._client.zscan(self._held[0], scan, count=count, score_cast_func=_score_text)
        pairs = cast(list[tuple[bytes, str]], rows)
        return int(nxt), [Position(score=str(score), member_id=names.text(member)) for member, score in pairs]

    async def held_note(self, member_id: str) -> str | None:
        value = await self._client.hget(self._held[1], member_id)
        return None if value is None else names.text(value)

    async def depart(self, position: Position, parcel_id: str = "", parcel: str = "") -> bool:
        """The held job left the store: forget it and, with a parcel, put its resolve in the outbox.

        One script, so across replicas and restarts exactly one caller takes each departure.
        """
        args = [position.member_id, position.score, parcel_id, parcel]
        return bool(await self._depart(keys=[*self._held, self.outbox], args=args))

    async def release(self, position: Position) -> None:
        """Forget a lease whose record left the store (retried or trimmed) without moving the watermark."""
        await self._client.zrem(self._keys[2], position.member_id)
        await self._client.hdel(self._keys[3], position.member_id)

    async def reclaim_expired(self, now_ms: int, limit: int = 10) -> list[Position]:
        """Take over leases whose holder stopped (killed, hung) without finishing."""
        flat = await self._reclaim(keys=self._keys[2:], args=[now_ms, self._lease_ms, limit])
        items = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
        return [Position(score=items[i + 1], member_id=items[i]) for i in range(0, len(items), 2)]
