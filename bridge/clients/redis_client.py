"""Building the Redis client the whole bridge shares: one server, or a Redis Cluster.

`build_redis` is the one factory (the service and every operator command use it). With
`[redis] cluster = true` it returns `redis.asyncio.cluster.RedisCluster`, typed as the
plain client: the bridge only uses commands both offer, every script and every
transaction touches keys of one slot (docs/design.md, section 2), `SCAN` runs on every
master (redis-py's cluster `scan_iter` keeps one cursor per primary), and commands
without a key are sent to an explicit node where it matters (`WAIT`, the health probe).
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.clients.redis_conn import taskless_writes
from bridge.config.redis import RedisSettings

# MOVED/ASK are followed by the cluster client itself; connection errors, timeouts and
# CLUSTERDOWN (a failover under way) are retried this often, with jittered backoff, before
# the bridge's own loops (which back off further) see the error.
CLUSTER_RETRIES = 6
CLUSTER_BACKOFF_BASE_S = 0.05
CLUSTER_BACKOFF_CAP_S = 1.0


def build_redis(url: str, settings: RedisSettings, max_connections: int = 256) -> redis.Redis:
    """A pooled client sized well above the bridge's own concurrency.

    A plain ConnectionPool costs about a quarter less CPU per command than a
    BlockingConnectionPool; in-flight work is bounded by `sources.concurrency`,
    so the pool never runs dry (if it did, the command fails as a RedisError and
    the pipeline retries it). Commands fail fast while Redis is down; the loops
    that call them retry.
    """
    if settings.cluster:
        return cast(redis.Redis, build_cluster(url, settings, max_connections))
    pool = redis.ConnectionPool.from_url(
        url,
        max_connections=max_connections,
        socket_timeout=settings.socket_timeout_s,
        socket_connect_timeout=min(2.0, settings.socket_timeout_s),
        health_check_interval=15,
        **taskless_writes(url),
    )
    return redis.Redis(connection_pool=pool)


def build_cluster(url: str, settings: RedisSettings, max_connections: int) -> RedisCluster:
    """The cluster client: `url` is any node; the others are learnt from it (and kept up to date)."""
    retry = Retry(
        ExponentialWithJitterBackoff(base=CLUSTER_BACKOFF_BASE_S, cap=CLUSTER_BACKOFF_CAP_S),
        CLUSTER_RETRIES,
        supported_errors=(RedisConnectionError, RedisTimeoutError),
    )
    return BridgeCluster.from_url(
        url,
        max_connections=max_connections,  # per node
        socket_timeout=settings.socket_timeout_s,
        socket_connect_timeout=min(2.0, settings.socket_timeout_s),
        health_check_interval=15,
        retry=retry,
    )


class ClusterUnavailableError(RedisConnectionError):
    """A cluster failure redis-py raises outside `RedisError`, as a connection error.

    - `RedisClusterException`: no node known for a slot yet (a failover under way);
    - `RuntimeError` / `AttributeError` from a connection torn down under a command: on
      `CLUSTERDOWN`, and after every few `MOVED`, redis-py's cluster client closes *all* its
      connections, also those other tasks are reading from at that moment ("the handler is
      closed", a reader that is now None).

    Every loop of the bridge backs off and retries a connection error, as while a single
    server is down; every step it retries is idempotent (a hand-off whose reply was lost finds
    its entry gone and leaves the parcel to the outbox sweep; a lost claim reply is returned by
    the own-list sweep). Without this, such an error would count as a bug in the pipeline and
    the entry would be archived with no alert.
    """


TORN_DOWN = (RedisClusterException, RuntimeError, AttributeError)


def _unavailable(exc: Exception) -> ClusterUnavailableError:
    return ClusterUnavailableError(f"{type(exc).__name__}: {exc}")


class BridgeCluster(RedisCluster):
    """RedisCluster whose failures are all `RedisError`s (see `ClusterUnavailableError`)."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except TORN_DOWN as exc:
            raise _unavailable(exc) from exc

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        return BridgeClusterPipeline(self, transaction)  # type: ignore[abstract]  # as RedisCluster.pipeline does

    async def initialize(self, *args: Any, **kwargs: Any) -> RedisCluster:
        try:
            return await super().initialize(*args, **kwargs)
        except TORN_DOWN as exc:
            raise _unavailable(exc) from exc


class BridgeClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        try:
            return await super().execute(raise_on_error, allow_redirections)
        except TORN_DOWN as exc:
            raise _unavailable(exc) from exc


def as_cluster(client: redis.Redis) -> RedisCluster | None:
    """The cluster client behind `client`, or None for a single server."""
    return client if isinstance(client, RedisCluster) else None


async def probe(client: redis.Redis) -> str | None:
    """Why Redis cannot serve the bridge right now, or None when it can.

    One server: it answers PING. A cluster: every master answers PING and the node asked
    reports `cluster_state:ok` (every slot served by a reachable master); during a failover
    that is false from the moment the dead master is flagged until its replica is promoted.
    """
    cluster = as_cluster(client)
    if cluster is None:
        await client.ping()
        return None
    await cluster.ping(target_nodes=RedisCluster.PRIMARIES)
    info = await cluster.cluster_info()
    state = _field(info, "cluster_state")
    return None if state == "ok" else f"cluster_state {state}"


def _field(info: object, name: str) -> str:
    """A field of CLUSTER INFO, parsed (dict) or raw (text)."""
    if isinstance(info, dict):
        value = info.get(name, info.get(name.encode(), "?"))
        return value.decode() if isinstance(value, bytes) else str(value)
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return "?"
