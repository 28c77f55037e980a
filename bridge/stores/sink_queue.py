"""One sink's durable queue: severity first, then oldest first, taken under a lease.

Layout (docs/design.md, section 5b), three keys in the sink's `{<sink>}` slot:

    dlq_bridge:sinkq:{<sink>}:ready    sorted set  id -> order score
    dlq_bridge:sinkq:{<sink>}:leased   sorted set  id -> lease expiry (epoch ms)
    dlq_bridge:sinkq:{<sink>}:items    hash        id -> alert JSON

An item id is `<urgency>:<handed-off ms>:<idempotency key>:<digest>`, so the
order score can always be rebuilt from the id (a lease that runs out puts the
item back in its place) and a repeated enqueue of the same hand-off is the
same item. The score is `urgency * 2**42 + ms` with urgency 0 (critical) … 3
(info): ms timestamps stay below 2**42 until the year 2109, so a higher
urgency band never reaches into the next one, and every score stays below
2**44, exact in a double (Redis scores and Lua numbers). `1e10 * priority +
ms` would not: 1.7e12 ms spans 170 priorities.

Take: one script re-queues expired leases, pops the lowest scores and leases
them (an id already leased is skipped). An item of a record format newer than
the taker reads is *left* (`leave_newer`): out of its lease into

    dlq_bridge:sinkq:{<sink>}:newer    sorted set  id -> record format

and every take puts back in `ready` the ones whose format the taker reads, so a
replica of the newer release delivers it and this one never takes it again
(bridge.core.formats; docs/operations.md, "Upgrades"). Ack: one script drops a batch of
items. Every script touches one slot.
`queued_sinks` finds every sink queue in Redis by SCAN (`bridge.delivery.orphans`).

A sink that keeps a ledger takes with reservations (`take(n, reserve=...)`): the
item's ledger key (`dlq_bridge:delivered:{<sink>}:<idempotency key>:<digest>`,
the same slot, rebuilt from the id) is reserved in the same script, or found
delivered (the item is dropped there: a duplicate), or found reserved by another
sender (`held`: the worker waits on it as before). Its ack then writes the
delivery mark in the same script that drops the item (`ack(..., marks=...)`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass

import redis.asyncio as redis
from redis.asyncio.client import Pipeline

from bridge.clients.replicas import ReplicaWait
from bridge.core.formats import READS, format_of
from bridge.core.items import MAX_URGENCY, now_ms, order_of
from bridge.stores import keys

REQUEUE_PER_TAKE = 100

_ORDER_LUA = """
local function order(id)
  local urgency, ms = string.match(id, '^(%d+):(%d+):')
  return tonumber(urgency) * 4398046511104 + tonumber(ms)
end
"""

ENQUEUE_LUA = _ORDER_LUA + """
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[1], order(ARGV[1]), ARGV[1])
  return 1
end
return 0
"""

# ARGV: id1, body1, id2, body2, ...: the hand-off's forward of many items (HSET, then ZADD NX, as `forward`).
FORWARD_LUA = _ORDER_LUA + """
for i = 1, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[1], 'NX', order(ARGV[i]), ARGV[i])
end
return #ARGV / 2
"""

# Items left for a newer replica that this taker reads (KEYS[4]: newer; the last ARGV: the format it
# reads) back to ready; expired leases back to ready (their items still exist); then pop up to n:
# `popped`, and `out` to fill.
_REQUEUE_AND_POP_LUA = """
local now, until_ms, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[#ARGV], 'LIMIT', 0, 100)) do
  redis.call('ZREM', KEYS[4], id)
  if redis.call('HEXISTS', KEYS[3], id) == 1 then redis.call('ZADD', KEYS[1], order(id), id) end
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  if redis.call('HEXISTS', KEYS[3], id) == 1 then redis.call('ZADD', KEYS[1], order(id), id) end
end
local popped = redis.call('ZPOPMIN', KEYS[1], n)
local out = {}
"""

TAKE_LUA = _ORDER_LUA + _REQUEUE_AND_POP_LUA + """
for i = 1, #popped, 2 do
  local body = redis.call('HGET', KEYS[3], popped[i])
  if body and not redis.call('ZSCORE', KEYS[2], popped[i]) then
    redis.call('ZADD', KEYS[2], until_ms, popped[i])
    out[#out + 1] = popped[i]
    out[#out + 1] = body
  end
end
return out
"""

# ARGV: now, until, n, requeue limit, ledger prefix, token head, reservation ms.
# Returns id, body, state, token per item; state: reserved | held | duplicate (dropped here).
TAKE_RESERVE_LUA = _ORDER_LUA + _REQUEUE_AND_POP_LUA + """
for i = 1, #popped, 2 do
  local id = popped[i]
  local body = redis.call('HGET', KEYS[3], id)
  if body and not redis.call('ZSCORE', KEYS[2], id) then
    local ledger = ARGV[5] .. string.match(id, '^%d+:%d+:(.*)$')
    local token = ARGV[6] .. '-' .. i
    local state = 'reserved'
    if not redis.call('SET', ledger, token, 'NX', 'PX', ARGV[7]) then
      local value = redis.call('GET', ledger)
      if value and string.sub(value, 1, 8) ~= 'sending:' then state = 'duplicate' else state = 'held' end
    end
    if state == 'duplicate' then
      redis.call('HDEL', KEYS[3], id)
    else
      redis.call('ZADD', KEYS[2], until_ms, id)
    end
    out[#out + 1] = id
    out[#out + 1] = body
    out[#out + 1] = state
    out[#out + 1] = token
  end
end
return out
"""

# KEYS: ready, leased, items, newer, then the ledger keys to mark. ARGV: mark value, ttl s, then the ids.
# (An item one replica left for a newer one while another had taken it leaves `newer` here too.)
ACK_LUA = """
local ids = {unpack(ARGV, 3)}
redis.call('ZREM', KEYS[2], unpack(ids))
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('ZREM', KEYS[4], unpack(ids))
for k = 5, #KEYS do redis.call('SET', KEYS[k], ARGV[1], 'EX', ARGV[2]) end
return redis.call('HDEL', KEYS[3], unpack(ids))
"""

RELEASE_LUA = _ORDER_LUA + """
local back = 0
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 and redis.call('HEXISTS', KEYS[3], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[1], order(ARGV[i]), ARGV[i])
    back = back + 1
  end
end
return back
"""

# KEYS: ready, leased, newer, items. ARGV: id, the format the caller reads. Only a leased item still
# queued is left (an acked one is gone), under the format its body has *now*: a newer replica may
# have rewritten it for this one since it was taken (bridge.delivery.downgrade), and then it goes
# back to ready instead. Returns 1 left, 2 back to ready, 0 gone.
LEAVE_NEWER_LUA = _ORDER_LUA + """
local body = redis.call('HGET', KEYS[4], ARGV[1])
if not body or redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
local fmt = tonumber(string.match(body, '^{"v":(%d+)[,}]') or '1')
if fmt <= tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], order(ARGV[1]), ARGV[1])
  return 2
end
redis.call('ZADD', KEYS[3], fmt, ARGV[1])
return 1
"""

# KEYS: items, newer. ARGV: id, body, format. Only an item still queued is rewritten.
REWRITE_LUA = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  if redis.call('ZSCORE', KEYS[2], ARGV[1]) then redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[1]) end
  return 1
end
return 0
"""

STATS_LUA = """
local oldest = -1
local function consider(ms) if oldest < 0 or ms < oldest then oldest = ms end end
for urgency = 0, tonumber(ARGV[1]) do
  local low = urgency * 4398046511104
  local head = redis.call('ZRANGEBYSCORE', KEYS[1], low, low + 4398046511103, 'WITHSCORES', 'LIMIT', 0, 1)
  if head[2] then consider(tonumber(head[2]) - low) end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, 999)) do
  local ms = string.match(id, '^%d+:(%d+):')
  if ms then consider(tonumber(ms)) end
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), oldest, redis.call('ZCARD', KEYS[3])}
"""


@dataclass(frozen=True)
class Taken:
    """One leased item: its id (for ack/release) and the alert JSON.

    `state` of a take with reservations: `reserved` (its ledger key is ours, `token`),
    `held` (another sender's reservation), `duplicate` (already delivered; dropped).
    """

    id: str
    body: str
    state: str = ""
    token: str = ""


@dataclass(frozen=True)
class Reserve:
    """What a take with reservations needs: the sink's ledger prefix, a token head, the TTL."""

    prefix: str
    token_head: str  # `sending:<owner>:<process>:<nonce>`; the script adds `-<n>` per item
    ttl_ms: int


@dataclass(frozen=True)
class QueueStats:
    ready: int
    leased: int
    oldest_ms: int | None  # hand-off time of the oldest item, ready or leased
    newer: int = 0  # items of a newer record format, left for a replica that reads it

    @property
    def depth(self) -> int:
        return self.ready + self.leased

    def oldest_age_s(self, at_ms: int) -> float:
        return 0.0 if self.oldest_ms is None else max(0.0, (at_ms - self.oldest_ms) / 1000)


class SinkQueue:
    """Enqueue, take (leased), ack, renew and release one sink's items."""

    def __init__(self, client: redis.Redis, sink: str, lease_s: float = 15.0, reads: int = READS) -> None:
        self.sink = sink
        self.keys = keys.sink_queue(sink)
        self._redis = client
        self._lease_ms = int(lease_s * 1000)
        self._reads = reads  # the newest record format this replica reads (bridge.core.formats)
        self.enqueue_script = client.register_script(ENQUEUE_LUA)
        self._take = client.register_script(TAKE_LUA)
        self._forward = client.register_script(FORWARD_LUA)
        self._ack = client.register_script(ACK_LUA)
        self._take_reserve = client.register_script(TAKE_RESERVE_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._stats = client.register_script(STATS_LUA)
        self._leave_newer = client.register_script(LEAVE_NEWER_LUA)
        self._rewrite = client.register_script(REWRITE_LUA)

    @property
    def _all(self) -> list[str]:
        return [self.keys.ready, self.keys.leased, self.keys.items]

    @property
    def _taking(self) -> list[str]:
        return [*self._all, self.keys.newer]

    async def put(self, item: str, body: str) -> bool:
        """Add one item; False when it is already queued or leased (a repeated forward)."""
        return bool(await self.enqueue_script(keys=[self.keys.ready, self.keys.items], args=[item, body]))

    async def take(self, n: int, at_ms: int | None = None, reserve: Reserve | None = None) -> list[Taken]:
        """Lease up to `n` items, most urgent and oldest first; expired leases come back first.

        With `reserve`, each item's ledger key is reserved in the same step (see module doc).
        """
        at = now_ms() if at_ms is None else at_ms
        if reserve is None:
            flat = await self._take(keys=self._taking, args=[at, at + self._lease_ms, n, REQUEUE_PER_TAKE, self._reads])
            return [Taken(_text(flat[i]), _text(flat[i + 1])) for i in range(0, len(flat), 2)]
        args: list[str | int] = [
            at, at + self._lease_ms, n, REQUEUE_PER_TAKE, reserve.prefix, reserve.token_head, reserve.ttl_ms,
            self._reads,
        ]
        flat = await self._take_reserve(keys=self._taking, args=args)
        return [
            Taken(_text(flat[i]), _text(flat[i + 1]), _text(flat[i + 2]), _text(flat[i + 3]))
            for i in range(0, len(flat), 4)
        ]

    async def ack(self, *items: str, marks: Sequence[str] = (), mark_value: str = "", ttl_s: int = 0) -> None:
        """Drop delivered items (one script for a batch); `marks`: ledger keys (this sink's slot)
        set to `mark_value` for `ttl_s` in the same script."""
        if items:
            await self._ack(keys=[*self._taking, *marks], args=[mark_value, ttl_s, *items])

    def forward(self, pipe: Pipeline, item: str, body: str) -> None:
        """Queue `item` on a (non-transactional) pipeline: HSET, then ZADD NX (docs/design.md, section 5b).

        Plain commands, no script: a scripted pipeline costs a SCRIPT EXISTS round trip.
        A crash between the two leaves the parcel in the outbox, and its repeat adds the
        ZADD; a repeat while the item is leased is skipped by `take`.
        """
        pipe.hset(self.keys.items, item, body)
        pipe.zadd(self.keys.ready, {item: order_of(item)}, nx=True)

    async def forward_many(self, items: list[tuple[str, str]], replicas: ReplicaWait | None = None) -> None:
        """`forward` for many (id, body) pairs in one script: one round trip, the `{<sink>}` slot only;
        with `replicas`, a WAIT follows on the same connection (`[redis] wait_replicas`)."""
        if not items:
            return
        args = [x for pair in items for x in pair]
        if replicas is None:
            await self._forward(keys=[self.keys.ready, self.keys.items], args=args)
        else:
            await replicas.script(self._forward, [self.keys.ready.encode(), self.keys.items.encode()], args)

    async def renew(self, items: list[str]) -> None:
        """Push the lease of items still in flight forward (only those still leased)."""
        if items:
            until = now_ms() + self._lease_ms
            await self._redis.zadd(self.keys.leased, dict.fromkeys(items, until), xx=True)

    async def leave_newer(self, item: str, fmt: int = 0) -> bool:
        """Leave a leased item of a record format newer than this replica reads for a replica that
        reads it: out of its lease, never taken by this replica again (see module doc). False when it
        is gone, or was rewritten in a format this replica reads meanwhile (then it is ready again).
        `fmt` (what the caller saw) is only for the caller's log: the script reads the body again."""
        left = await self._leave_newer(keys=[*self._all[:2], self.keys.newer, self.keys.items],
                                       args=[item, self._reads])
        return int(left) == 1

    async def newer_than(self, fmt: int) -> AsyncIterator[tuple[str, str]]:
        """(id, body) of every queued item of a record format newer than `fmt` (an HSCAN)."""
        async for item, body in self._redis.hscan_iter(self.keys.items, count=500):
            text = _text(body)
            if format_of(text) > fmt:
                yield _text(item), text

    async def rewrite(self, item: str, body: str, fmt: int) -> bool:
        """Replace a still-queued item's body with the same record in format `fmt`; an item left for
        a newer replica is then left for a replica that reads `fmt` (every take of one puts it back)."""
        return bool(await self._rewrite(keys=[self.keys.items, self.keys.newer], args=[item, body, fmt]))

    async def release(self, items: list[str]) -> int:
        """Put leased items back at once (a graceful stop), in their place."""
        return int(await self._release(keys=self._all, args=items)) if items else 0

    @staticmethod
    def queue_holds(pipe: Pipeline, sink: str, item: str) -> None:
        """Queue whether `sink`'s queue still holds `item`, ready or leased (one HEXISTS reply)."""
        pipe.hexists(keys.sink_queue(sink).items, item)

    async def stats(self) -> QueueStats:
        ready, leased, oldest, newer = await self._stats(
            keys=[self.keys.ready, self.keys.leased, self.keys.newer], args=[MAX_URGENCY]
        )
        return QueueStats(int(ready), int(leased), None if int(oldest) < 0 else int(oldest), int(newer))


async def queued_sinks(client: redis.Redis, skip: Collection[str] = ()) -> AsyncIterator[tuple[str, int]]:
    """(sink, items queued) for each sink queue in Redis whose sink is not in `skip`: a SCAN for the
    `items` hashes (every master on a cluster), then one HLEN per queue reported."""
    async for raw in client.scan_iter(match=keys.SINK_QUEUE_ITEMS_MATCH, count=1000, _type="hash"):
        sink = keys.sink_of_queue_items(_text(raw))
        if sink is not None and sink not in skip:
            yield sink, int(await client.hlen(raw))


def _text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode("utf-8")
