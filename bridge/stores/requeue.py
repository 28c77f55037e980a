"""Moving dead letters back to their work queue, attempts reset: one atomic script per entry
(docs/design.md, "Redrive"). The `redrive` command and the console's redrive both go through here.

On Redis Cluster, a work queue in another slot than its DLQ is reached through a staging list
(`dlq_bridge:redrive:<ref>`): a kill there may push an entry twice, never lose it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis.asyncio as redis

from bridge.clients.redis_client import as_cluster
from bridge.core import names
from bridge.stores import keys

# KEYS[1] source list, KEYS[2] work queue; ARGV[1] the exact entry, ARGV[2] the bytes to push.
REDRIVE_LUA = """
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1
"""
ATTEMPT_FIELDS = ("attempts", "attemptsMade", "retry_count")


@dataclass(frozen=True)
class Plan:
    source: str  # the list entries leave (DLQ or archive)
    target: str  # the work queue they join
    dlq: str  # the DLQ key, for normalizing entries
    dry_run: bool = False
    limit: int | None = None
    job_ids: frozenset[str] = frozenset()
    reset: bool = True  # attempts set to 0 (a work queue); False: the bytes move as they are (a DLQ)

    def pushed(self, raw: bytes) -> bytes:
        """The bytes pushed onto the target for this entry."""
        return reset_attempts(raw) if self.reset else raw


async def _move(client: redis.Redis, plan: Plan, batch: list[bytes]) -> list[bool]:
    """Pipelined, but each entry is its own script: atomic one by one. Which of `batch` moved."""
    if not same_slot(client, plan):
        return await _move_across_slots(client, plan, batch)
    async with client.pipeline(transaction=False) as pipe:
        for raw in batch:
            pipe.eval(REDRIVE_LUA, 2, plan.source, plan.target, raw, plan.pushed(raw))
        results = await pipe.execute()
    return [bool(int(r)) for r in results]


def same_slot(client: redis.Redis, plan: Plan) -> bool:
    """One server, or a cluster where the DLQ and the work queue share a slot."""
    if as_cluster(client) is None:
        return True
    return keys.key_slot(names.encode(plan.source)) == keys.key_slot(names.encode(plan.target))


async def _move_across_slots(client: redis.Redis, plan: Plan, batch: list[bytes]) -> list[bool]:
    """On a cluster, through `dlq_bridge:redrive:<ref>` in the DLQ's slot (no script may span two slots).

    Per entry: one script moves it from the source to the staging list (atomic, same slot),
    then it is pushed onto the work queue, then dropped from the staging list. A kill in
    between leaves it in the staging list, which the next redrive of this DLQ empties first:
    never lost; at worst pushed twice.
    """
    staging = keys.redrive_staging(plan.dlq)
    async with client.pipeline(transaction=False) as pipe:
        for raw in batch:
            pipe.eval(REDRIVE_LUA, 2, plan.source, staging, raw, plan.pushed(raw))
        moved = [bool(int(r)) for r in await pipe.execute()]
    await _unstage(client, plan.target, staging, [plan.pushed(raw) for raw, m in zip(batch, moved, strict=True) if m])
    return moved


async def _unstage(client: redis.Redis, target: str, staging: str, entries: list[bytes]) -> None:
    if not entries:
        return
    await client.lpush(target, *entries)
    async with client.pipeline(transaction=False) as pipe:
        for raw in entries:
            pipe.lrem(staging, 1, raw)  # type: ignore[arg-type]  # redis-py takes bytes values
        await pipe.execute()


def staging_key(dlq: str) -> str:
    """The staging list of a cross-slot redrive of `dlq` (in the DLQ's slot), for messages."""
    return keys.redrive_staging(dlq)


async def finish_staged(client: redis.Redis, plan: Plan) -> int:
    """Push what a killed cross-slot redrive of this DLQ left in its staging list (oldest first)."""
    if same_slot(client, plan) or plan.dry_run:
        return 0
    staging = keys.redrive_staging(plan.dlq)
    left = [r if isinstance(r, bytes) else r.encode() for r in reversed(await client.lrange(staging, 0, -1))]
    await _unstage(client, plan.target, staging, left)
    return len(left)


def quarantine_plan(
    dlq: str, *, target: str | None = None, dry_run: bool = False, limit: int | None = None,
    job_ids: frozenset[str] = frozenset(),
) -> Plan:
    """Quarantined entries (`dlq_bridge:quarantine:<ref>`, the DLQ's slot) back onto their DLQ, byte
    for byte: the bridge claims them again as new entries (their claim counter went with the quarantine)."""
    return Plan(keys.quarantine(dlq), target or dlq, dlq, dry_run, limit, job_ids, reset=False)


def reset_attempts(raw: bytes) -> bytes:
    """The entry with `attempts` (and other known counters) set to 0; non-objects unchanged."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(obj, dict):
        return raw
    obj["attempts"] = 0
    for name in ATTEMPT_FIELDS[1:]:
        if name in obj:
            obj[name] = 0
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


async def move_batch(client: redis.Redis, plan: Plan, batch: list[bytes]) -> int:
    """Move these exact entries from `plan.source` to `plan.target` (attempts reset); how many moved."""
    return sum(await _move(client, plan, batch))


async def move_each(client: redis.Redis, plan: Plan, batch: list[bytes]) -> list[bool]:
    """`move_batch`, saying which of `batch` moved (the one redrive, bridge.redrive.operation, acts on those)."""
    return await _move(client, plan, batch)
