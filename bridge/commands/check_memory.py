"""`dlq-bridge check` rows for Redis memory: the eviction policy, how full it is, the quarantine lists."""

from __future__ import annotations

import asyncio

from bridge.clients.redis_memory import (
    OUT_OF_MEMORY,
    SAFE_POLICY,
    NodeMemory,
    describe,
    policy_problem,
    read_memory,
    unknown_policy_note,
)
from bridge.commands.common import open_redis, redis_target
from bridge.settings import Settings
from bridge.stores.archive import QUARANTINE_MATCH, quarantine_depth

OK, FAIL, WARN = "ok", "FAIL", "warn"


async def check_redis_memory(settings: Settings, probe_s: float) -> list[tuple[str, str, str, str]]:
    """(component, target, status, detail) rows; none when Redis is unreachable (its own row says so)."""
    try:
        async with open_redis(settings) as client:
            nodes = await asyncio.wait_for(read_memory(client), probe_s)
            quarantined = await asyncio.wait_for(quarantine_depth(client), probe_s)
    except Exception:  # the bridge's Redis: already reported by its own row
        return []
    if not nodes:
        return []
    target = redis_target(settings)
    rows = [("redis memory", target, *_policy_row(nodes, settings.redis.allow_eviction))]
    rows += [("redis memory", n.node or target, FAIL, f"{OUT_OF_MEMORY} ({describe(n)}): writes are refused")
             for n in nodes if n.full]
    if quarantined:
        rows.append(("quarantine", QUARANTINE_MATCH, WARN,
                     f"{quarantined} entries held, never trimmed: list them with `dlq-bridge redrive QUEUE "
                     "--quarantine --dry-run`, fix the cause, then put them back on their DLQ with "
                     "`dlq-bridge redrive QUEUE --quarantine` (runbooks/operations/entry-quarantined.md)"))
    return rows


def _policy_row(nodes: list[NodeMemory], allow_eviction: bool) -> tuple[str, str]:
    problem = policy_problem(nodes)
    if problem and allow_eviction:
        return WARN, f"{problem}; allowed by [redis] allow_eviction = true"
    if problem:
        return FAIL, f"{problem} (or [redis] allow_eviction = true to run anyway)"
    note = unknown_policy_note(nodes)
    if note:
        return WARN, note
    fullest = max(nodes, key=lambda n: n.ratio)
    where = " (CONFIG is disabled here: read from INFO memory)" if any(n.config_disabled for n in nodes) else ""
    return OK, f"maxmemory-policy {SAFE_POLICY}{where}; {describe(fullest)}"
