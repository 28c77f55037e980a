"""The Redis client factory (bridge/clients/redis_client.py): cluster settings and how cluster failures surface."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import RedisError, SlotNotCoveredError

from bridge.clients.redis_client import BridgeCluster, as_cluster, build_redis
from bridge.settings import RedisSettings


@pytest.mark.parametrize(
    ("url", "problem"),
    [("unix:///tmp/r.sock", "one node, database 0"), ("redis://10.0.0.5:7000/3", "one node, database 0")],
)
def test_cluster_needs_a_node_url_on_database_0(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RedisSettings.model_validate({"url": url, "cluster": True})


def test_cluster_without_a_url_is_refused() -> None:
    """The embedded Redis is one server: a cluster needs the url of one of its nodes."""
    with pytest.raises(ValueError, match=r"redis.cluster needs redis.url"):
        RedisSettings.model_validate({"cluster": True})


def test_the_factory_returns_the_cluster_client_only_when_asked() -> None:
    plain = build_redis("redis://127.0.0.1:1/0", RedisSettings.model_validate({"url": "redis://127.0.0.1:1/0"}))
    cluster = build_redis(
        "redis://127.0.0.1:1", RedisSettings.model_validate({"url": "redis://127.0.0.1:1", "cluster": True})
    )
    assert as_cluster(plain) is None and isinstance(as_cluster(cluster), BridgeCluster)


@pytest.mark.parametrize(
    "error",
    [
        SlotNotCoveredError('Slot "5063" is not covered by the cluster.'),
        RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed"),
        AttributeError("'NoneType' object has no attribute 'writelines'"),
    ],
)
async def test_cluster_failures_outside_redis_error_reach_the_loops_as_redis_errors(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loops retry RedisError; anything else would count as a pipeline bug (entry archived, no alert)."""

    async def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(RedisCluster, "execute_command", fail)
    monkeypatch.setattr(ClusterPipeline, "execute", fail)
    client = build_redis(
        "redis://127.0.0.1:1", RedisSettings.model_validate({"url": "redis://127.0.0.1:1", "cluster": True})
    )
    with pytest.raises(RedisError):
        await client.get("k")
    with pytest.raises(RedisError):
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            await pipe.execute()
