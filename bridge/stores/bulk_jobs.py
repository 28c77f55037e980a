"""The console's bulk actions in Redis (`dlq_bridge:console:bulk:{<id>}` + `:items`, `:tried`, `:lease`);
docs/design.md, section 6b (bulk actions: `bridge.console.bulk` decides what each item means).

One hash tag per action, so a cluster runs each MULTI on one slot:
- `{<id>}`        hash: action, who, filter, `as_of`, `total`, `processed`, `done`, `skipped`, `state`, …
- `{<id>}:items`  list: the snapshot's items, in order
- `{<id>}:tried`  set: the items a run started on (a crash mid-batch: tried again, known as retried)
- `{<id>}:lease`  string: the running batch's owner, `PX` LEASE_MS
Everything but the lease expires KEEP_S after the action is created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as redis

from bridge.core import names
from bridge.stores import keys

KEEP_S = 24 * 3600
LEASE_MS = 15_000  # a batch (≤ the console's BATCH_MAX items) takes well under this


def bulk_key(bulk_id: str, part: str = "") -> str:
    """`dlq_bridge:console:bulk:{<id>}` (+ `:<part>`): one slot per bulk action (a cluster's MULTI)."""
    return f"{keys.PREFIX}:console:bulk:{{{bulk_id}}}" + (f":{part}" if part else "")


class BulkJobs:
    """Bulk actions' snapshots, progress, leases and tried sets."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    async def create(self, bulk_id: str, meta: Mapping[Any, Any], items: Sequence[str]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(bulk_key(bulk_id), mapping=dict(meta))
            pipe.rpush(bulk_key(bulk_id, "items"), *items)
            for part in ("", "items"):
                pipe.expire(bulk_key(bulk_id, part), KEEP_S)
            await pipe.execute()

    async def meta(self, bulk_id: str) -> dict[str, str] | None:
        raw: dict[Any, Any] = await self._redis.hgetall(bulk_key(bulk_id))
        return {names.text(k): names.text(v) for k, v in raw.items()} if raw else None

    async def set_state(self, bulk_id: str, state: str) -> None:
        await self._redis.hset(bulk_key(bulk_id), "state", state)

    async def take_lease(self, bulk_id: str, owner: str) -> bool:
        return bool(await self._redis.set(bulk_key(bulk_id, "lease"), owner, nx=True, px=LEASE_MS))

    async def drop_lease(self, bulk_id: str, owner: str) -> None:
        lease = bulk_key(bulk_id, "lease")
        if names.text(await self._redis.get(lease) or b"") == owner:
            await self._redis.delete(lease)

    async def items(self, bulk_id: str, start: int, count: int) -> list[str]:
        return [names.text(i) for i in await self._redis.lrange(bulk_key(bulk_id, "items"), start, start + count - 1)]

    async def count(self, bulk_id: str, processed: int, done: int, skipped: int) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(bulk_key(bulk_id), "processed", processed)
            pipe.hincrby(bulk_key(bulk_id), "done", done)
            pipe.hincrby(bulk_key(bulk_id), "skipped", skipped)
            await pipe.execute()

    async def tried_before(self, bulk_id: str, items: Sequence[str]) -> set[str]:
        """Which of `items` a run already started on; all of them are marked tried now."""
        if not items:
            return set()
        tried = bulk_key(bulk_id, "tried")
        flags = await self._redis.smismember(tried, list(items))
        before = {i for i, f in zip(items, flags, strict=True) if f}
        await self._redis.sadd(tried, *items)
        await self._redis.expire(tried, KEEP_S)
        return before
