"""`[redis] wait_replicas`: WAIT for replicas after the writes that finish an entry.

Redis replicates asynchronously: a master that dies right after acknowledging a write may
take it with it when its replica is promoted. `WAIT n timeout` blocks until `n` replicas
have every write made so far *on the same connection*, so it must travel with the write:
here the write and its WAIT go out in one pipeline, which redis-py sends on one connection
of the node that owns the keys (on a cluster, the WAIT is aimed at the node owning the
key's slot with `target_nodes`).

A WAIT that times out (fewer replicas than asked) is counted and logged, and the bridge
carries on: the write is on the master, only not yet on enough replicas. A WAIT that
fails (the node died) raises like any Redis error, so the caller's retry or the outbox
sweep repeats the step (docs/design.md, section 5b).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio as redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from bridge.clients.redis_client import ClusterUnavailableError, as_cluster
from bridge.core.metrics import Metrics

log = logging.getLogger(__name__)

WARN_EVERY_S = 10.0


class ReplicaWait:
    """Runs a write and, when `replicas` > 0, a WAIT for it on the same connection."""

    def __init__(self, client: redis.Redis, replicas: int, timeout_s: float, metrics: Metrics | None = None) -> None:
        self._client = client
        self.replicas = replicas
        self._timeout_ms = max(1, int(timeout_s * 1000))
        self._metrics = metrics
        self._warned = 0.0

    @property
    def enabled(self) -> bool:
        return self.replicas > 0

    async def script(self, script: AsyncScript, keys: Sequence[bytes], args: Sequence[Any]) -> Any:
        """`script(keys, args)`, then WAIT on the node and connection that ran it."""
        if not self.enabled:
            return await script(keys=list(keys), args=list(args))
        for _ in range(2):
            await self._ready()
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                aimed = self._wait_on(pipe, keys[0])
                result, acked = await pipe.execute(raise_on_error=False)
            if isinstance(result, NoScriptError):  # a new or restarted node: load it, run again
                script.sha = await self._client.script_load(script.script)
                continue
            if isinstance(result, Exception):
                raise _as_redis_error(result)
            # the write is done either way; a WAIT whose node lost the slot meanwhile proves nothing
            self._check([acked if self._still_owns(aimed, keys[0]) else 0])
            return result
        raise NoScriptError("the script could not be loaded")

    async def pipeline(self, fill: Callable[[Any], None], keys: Sequence[str | bytes]) -> list[Any]:
        """Run the commands `fill(pipe)` queues, then WAIT on every node that owns one of `keys`."""
        if self.enabled:
            await self._ready()
        async with self._client.pipeline(transaction=False) as pipe:
            fill(pipe)
            aimed = self._wait_all(pipe, keys) if self.enabled else {}
            results: list[Any] = await pipe.execute()
        if aimed:
            if not all(self._still_owns(node, key) for key, node in aimed.items()):
                # a failover moved a slot while the batch ran (redis-py then re-sends it, but not
                # the WAIT to its node): unconfirmed, so the caller keeps its outbox parcel
                raise ClusterUnavailableError("a slot moved during the write and its WAIT")
            self._check(results[-len(aimed) :])
            results = results[: -len(aimed)]
        return results

    async def _ready(self) -> None:
        """A cluster client knows its slots only once initialized (lazily, or again after a failover)."""
        cluster = as_cluster(self._client)
        if cluster is not None:
            await cluster.initialize()

    def _wait_on(self, pipe: Any, key: str | bytes) -> str:
        """Queue a WAIT for the node owning `key`; the node's name ("" for one server)."""
        cluster = as_cluster(self._client)
        if cluster is None:
            pipe.execute_command("WAIT", self.replicas, self._timeout_ms)
            return ""
        node = _node_of(cluster, key)
        pipe.execute_command("WAIT", self.replicas, self._timeout_ms, target_nodes=node)
        return str(node.name)

    def _wait_all(self, pipe: Any, keys: Sequence[str | bytes]) -> dict[str | bytes, str]:
        """One WAIT per node owning one of `keys`: key → node name."""
        cluster = as_cluster(self._client)
        if cluster is None:
            return {keys[0]: self._wait_on(pipe, keys[0])}
        by_node = {_node_of(cluster, k).name: k for k in keys}
        return {key: self._wait_on(pipe, key) for key in by_node.values()}

    def _still_owns(self, node: str, key: str | bytes) -> bool:
        cluster = as_cluster(self._client)
        if cluster is None:
            return True
        try:
            return str(_node_of(cluster, key).name) == node
        except ClusterUnavailableError:
            return False

    def _check(self, acked: Sequence[Any]) -> None:
        for value in acked:
            if isinstance(value, Exception):
                raise _as_redis_error(value)
            ok = int(value) >= self.replicas
            if self._metrics is not None:
                self._metrics.replica_waits.labels("ok" if ok else "timeout").inc()
            if not ok and time.monotonic() - self._warned > WARN_EVERY_S:
                self._warned = time.monotonic()
                log.warning(
                    "WAIT %d: only %d replica(s) acknowledged within %d ms; carrying on (a failover now "
                    "could lose this write)", self.replicas, int(value), self._timeout_ms,
                )


def _node_of(cluster: RedisCluster, key: str | bytes) -> ClusterNode:
    """The master serving `key`'s slot, as the client knows it now."""
    try:
        node = cluster.get_node_from_key(key)  # type: ignore[arg-type]  # bytes keys work too
    except RedisClusterException as exc:  # no master known for the slot: a failover under way
        raise ClusterUnavailableError(str(exc)) from exc
    if node is None:
        raise ClusterUnavailableError("no master serves the slot of a key")
    return node


def _as_redis_error(exc: Exception) -> Exception:
    """A failed command's error, as a `RedisError` the caller's retry understands."""
    return exc if isinstance(exc, RedisError) else ClusterUnavailableError(f"{type(exc).__name__}: {exc}")
