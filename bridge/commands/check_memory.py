"""`dlq-bridge check` rows for Redis memory: the eviction policy, how full it is, the quarantine lists,
and the memory plan: what the bridge will keep at the current rate and settings (docs/operations.md,
"Redis memory: planning")."""

from __future__ import annotations

import asyncio
import time

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
from bridge.stores import footprint
from bridge.stores.archive import QUARANTINE_MATCH, Archive, quarantine_depth
from bridge.stores.groups import GroupReader

OK, FAIL, WARN = "ok", "FAIL", "warn"


async def check_redis_memory(settings: Settings, probe_s: float) -> list[tuple[str, str, str, str]]:
    """(component, target, status, detail) rows; none when Redis is unreachable (its own row says so)."""
    try:
        async with open_redis(settings) as client:
            nodes = await asyncio.wait_for(read_memory(client), probe_s)
            quarantined = await asyncio.wait_for(quarantine_depth(client), probe_s)
            sources, last_hour = await asyncio.wait_for(Archive(client).handed_off(time.time()), probe_s)
            grouped = [s.name for s in settings.effective_sinks() if s.group_by != "none"]
            open_groups = max([await GroupReader(client, name).open_count() for name in grouped], default=0)
    except Exception:  # the bridge's Redis: already reported by its own row
        return []
    if not nodes:
        return []
    target = redis_target(settings)
    rows = [("redis memory", target, *_policy_row(nodes, settings.redis.allow_eviction))]
    rows += [("redis memory", n.node or target, FAIL, f"{OUT_OF_MEMORY} ({describe(n)}): writes are refused")
             for n in nodes if n.full]
    rows.append(("redis memory plan", target, *plan_row(settings, nodes, sources, last_hour, open_groups)))
    if quarantined:
        rows.append(("quarantine", QUARANTINE_MATCH, WARN,
                     f"{quarantined} entries held, never trimmed: list them with `dlq-bridge redrive QUEUE "
                     "--quarantine --dry-run`, fix the cause, then put them back on their DLQ with "
                     "`dlq-bridge redrive QUEUE --quarantine` (runbooks/operations/entry-quarantined.md)"))
    return rows


def plan_row(
    settings: Settings, nodes: list[NodeMemory], sources: int, last_hour: int, open_groups: int = 0
) -> tuple[str, str]:
    """The projection after PLAN_DAYS at the last hour's rate; warn past PLAN_SHARE of maxmemory."""
    days, share = footprint.PLAN_DAYS, footprint.PLAN_SHARE
    per_day, kept = last_hour * 24.0, settings.retention()
    parts = footprint.plan(per_day, sources, kept, open_groups)
    need = footprint.total(parts)
    biggest = max(parts, key=lambda p: p.bytes)
    detail = (f"{per_day / 86_400:.2f} dead letters/s over {sources} sources (the last hour): about "
              f"{footprint.mb(need)} after {days} days, most in {biggest.name} ({footprint.mb(biggest.bytes)}, "
              f"{biggest.bound}); a sink failing for good adds up to {footprint.mb(footprint.worst_case_extra(kept))}")
    limit = sum(n.maxmemory for n in nodes) if all(n.maxmemory for n in nodes) else 0
    if limit and need > share * limit:
        return WARN, (f"{detail}: more than {share:.0%} of maxmemory {footprint.mb(limit)}; raise maxmemory "
                      "or lower sources.archive_max / delivery.ledger_ttl_s (docs/operations.md, \"Redis memory: "
                      "planning\")")
    return OK, detail


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
