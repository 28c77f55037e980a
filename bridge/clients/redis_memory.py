"""Redis memory: the eviction policy the bridge needs, and a full Redis said out loud.

The bridge keeps its state in Redis (processing lists, the outbox, sink queues, ledger keys,
leases, heartbeats). Only `maxmemory-policy noeviction` keeps all of it: an `allkeys-*` policy
can evict any of those keys, a `volatile-*` one every key with a TTL (ledger keys, leases,
heartbeats), and either means lost or repeated alerts without a trace (docs/design.md,
section 6). `check` fails such a policy and `run` refuses it unless `[redis] allow_eviction`.

With `noeviction` a full Redis refuses writes (`OOM command not allowed`): nothing is lost, the
bridge only stops making progress. `RedisMemory` makes that visible: `/healthz` 503 with
`out of memory (used X of maxmemory Y)`, one "Redis is full" log line at most every 10 s, the
`dlq_bridge_redis_memory_*` gauges, and it all clears by itself once memory frees.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from bridge.clients.redis_client import as_cluster, build_redis
from bridge.config.redis import RedisSettings
from bridge.core.metrics import Metrics

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
OUT_OF_MEMORY = "out of memory"
LOG_EVERY_S = 10.0
FULL_HOLD_S = 5.0  # a refused write counts as "full" this long, even if INFO shows a little room
WATCH_EVERY_S = 5.0
QUARANTINE_EVERY_S = 60.0

_EVICTS = {
    "allkeys": "can evict any key: DLQ entries, processing lists, the outbox, sink queues and delivery "
    "ledger keys (lost or repeated alerts)",
    "volatile": "can evict every key with a TTL: delivery ledger keys, claim leases and heartbeats "
    "(repeated alerts, entries claimed twice)",
}


@dataclass(frozen=True)
class NodeMemory:
    """One master's figures; `policy` None when neither CONFIG GET nor INFO told it."""

    node: str
    used: int
    maxmemory: int
    policy: str | None
    config_disabled: bool = False

    @property
    def full(self) -> bool:
        return self.maxmemory > 0 and self.used >= self.maxmemory

    @property
    def ratio(self) -> float:
        return self.used / self.maxmemory if self.maxmemory else 0.0


def eviction_risk(policy: str | None) -> str | None:
    """What `policy` can evict of the bridge's keys, or None for a safe (or unknown) policy."""
    if policy is None or policy == SAFE_POLICY:
        return None
    return _EVICTS.get(policy.split("-", 1)[0], f"is not {SAFE_POLICY} and may evict the bridge's keys")


def policy_problem(nodes: list[NodeMemory]) -> str | None:
    """One line for the first master whose policy can evict, or None."""
    for node in nodes:
        risk = eviction_risk(node.policy)
        if risk is not None:
            where = f" on {node.node}" if node.node else ""
            return f"maxmemory-policy {node.policy}{where} {risk}: set maxmemory-policy {SAFE_POLICY}"
    return None


def unknown_policy_note(nodes: list[NodeMemory]) -> str | None:
    """Said (and carried on) where CONFIG is disabled and INFO does not tell the policy either."""
    if any(n.policy is None for n in nodes):
        return (f"maxmemory-policy unknown: CONFIG GET is disabled on this Redis (managed?); "
                f"make sure it is {SAFE_POLICY}")
    return None


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def describe(node: NodeMemory) -> str:
    limit = human_bytes(node.maxmemory) if node.maxmemory else "no limit"
    return f"used {human_bytes(node.used)} of maxmemory {limit}"


async def read_memory(client: redis.Redis) -> list[NodeMemory]:
    """`maxmemory`, `maxmemory-policy` and `used_memory` of the server, or of every master of a cluster."""
    cluster = as_cluster(client)
    if cluster is None:
        return [await _node_memory("", client.info("memory"), lambda: client.config_get("maxmemory*"))]
    found = []
    if not cluster.get_primaries():  # a client that has not sent a command yet knows no node
        await cluster.initialize()
    for node in cluster.get_primaries():
        found.append(await _node_memory(node.name, cluster.info("memory", target_nodes=node),
                                        functools.partial(cluster.config_get, "maxmemory*", target_nodes=node)))
    return found


async def _node_memory(name: str, info_call: Awaitable[Any], config_call: Callable[[], Awaitable[Any]]) -> NodeMemory:
    info = await info_call
    disabled = False
    try:
        config = await config_call()
    except ResponseError:  # CONFIG renamed or not allowed (managed Redis): INFO memory has the figures too
        config, disabled = {}, True
    policy = config.get("maxmemory-policy") or info.get("maxmemory_policy")
    maxmemory = config.get("maxmemory", info.get("maxmemory", 0))
    return NodeMemory(name, int(info.get("used_memory", 0)), int(maxmemory or 0),
                      str(policy) if policy else None, disabled)


def is_full_error(exc: BaseException) -> bool:
    """A write refused by a full Redis (also from inside a script)."""
    if isinstance(exc, OutOfMemoryError):
        return True
    return isinstance(exc, ResponseError) and "OOM command not allowed" in str(exc)


class RedisMemory:
    """The fullest master's memory, kept fresh for `/healthz`, the metrics and the "Redis is full" log."""

    def __init__(
        self,
        client: redis.Redis,
        metrics: Metrics,
        *,
        count_quarantined: Callable[[], Awaitable[int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._count_quarantined = count_quarantined  # the quarantine lists' store (`bridge.stores.archive`)
        self._metrics = metrics
        self._clock = clock
        self._fullest: NodeMemory | None = None
        self._refused_at = float("-inf")
        self._logged_at = float("-inf")
        self._was_full = False

    async def refresh(self) -> NodeMemory | None:
        nodes = await read_memory(self._client)
        self._fullest = max(nodes, key=lambda n: (n.ratio, n.used)) if nodes else None
        if self._fullest is not None:
            self._metrics.redis_memory_used.set(self._fullest.used)
            self._metrics.redis_memory_max.set(self._fullest.maxmemory)
        self._say_when_room_is_back()
        return self._fullest

    def problem(self) -> str | None:
        """`out of memory (used X of maxmemory Y)` while Redis refuses writes, else None."""
        node = self._fullest
        refused = self._clock() - self._refused_at < FULL_HOLD_S
        if node is None or not (node.full or refused):
            return None
        return f"{OUT_OF_MEMORY} ({describe(node)})"

    def refused(self, target: str) -> str:
        """Note a write Redis refused as full; log it at most every LOG_EVERY_S. The health detail."""
        now = self._clock()
        self._refused_at = now
        if self._fullest is None:  # said with the figures once the watcher has read them (within a second)
            return OUT_OF_MEMORY
        figures = describe(self._fullest)
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning("Redis is full at %s (%s): writes are refused, nothing is claimed and nothing is lost; "
                        "waiting for memory to free", target, figures)
        return f"{OUT_OF_MEMORY} ({figures})"

    async def watch(self, stop: asyncio.Event, *, allow_eviction: bool) -> None:
        """Refresh every few seconds; count the quarantine lists every minute; say when room is back."""
        warned_policy = False
        next_quarantine = 0.0
        while not stop.is_set():
            with contextlib.suppress(RedisError, OSError):
                await self.refresh()
                if not warned_policy:
                    warned_policy = await self._warn_policy(allow_eviction)
                if self._count_quarantined is not None and self._clock() >= next_quarantine:
                    self._metrics.quarantine_depth.set(await self._count_quarantined())
                    next_quarantine = self._clock() + QUARANTINE_EVERY_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=WATCH_EVERY_S)

    def _say_when_room_is_back(self) -> None:
        full = self.problem() is not None
        if self._was_full and not full and self._fullest is not None:
            log.warning("Redis has room again (%s): carrying on", describe(self._fullest))
        self._was_full = full

    async def _warn_policy(self, allow_eviction: bool) -> bool:
        problem = policy_problem(await read_memory(self._client))
        if problem and allow_eviction:
            log.warning("%s; running anyway because [redis] allow_eviction = true", problem)
        elif problem:  # `run` refuses this at start; here when Redis was unreachable then
            log.error("%s (or set [redis] allow_eviction = true)", problem)
        return True


async def refuse_eviction(url: str, settings: RedisSettings, timeout_s: float = 3.0) -> str | None:
    """Before `run` starts: the reason to refuse this Redis's eviction policy, or None.

    An unreachable Redis is not refused here (the bridge waits for it; the watcher checks the
    policy once it answers). `allow_eviction` turns the refusal into a warning.
    """
    client: Any = build_redis(url, settings, max_connections=4)
    try:
        nodes = await asyncio.wait_for(read_memory(client), timeout_s)
    except (RedisError, OSError, TimeoutError) as exc:
        log.warning("maxmemory-policy not checked at start (%s): checked once Redis answers", type(exc).__name__)
        return None
    finally:
        await client.aclose()
    note = unknown_policy_note(nodes)
    if note:
        log.warning("%s", note)
    elif any(n.config_disabled for n in nodes):
        log.info("CONFIG is disabled on this Redis: maxmemory-policy read from INFO memory")
    problem = policy_problem(nodes)
    if problem and settings.allow_eviction:
        log.warning("%s; running anyway because [redis] allow_eviction = true", problem)
        return None
    return f"{problem} (or [redis] allow_eviction = true to run anyway)" if problem else None
