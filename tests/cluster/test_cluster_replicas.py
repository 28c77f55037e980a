"""`[redis] wait_replicas` on the cluster: the WAIT travels with the write it protects."""

from __future__ import annotations

import os
import signal

from redis.asyncio.cluster import RedisCluster

from bridge.clients.redis_client import build_redis
from bridge.clients.replicas import ReplicaWait
from bridge.core.metrics import Metrics
from bridge.settings import RedisSettings
from tests.support.redis_cluster import LocalCluster

SCRIPT = "redis.call('LPUSH', KEYS[1], ARGV[1]) return redis.call('LLEN', KEYS[1])"


def waits(metrics: Metrics, outcome: str) -> float:
    return metrics.replica_waits.labels(outcome)._value.get()


async def test_a_write_waits_for_its_replica_and_notices_a_stalled_one(
    local_cluster: LocalCluster, aredis: RedisCluster
) -> None:
    """The WAIT goes to the master of the key's slot, after the write on the same connection:
    it reports the replica while it follows, and the short count while it is stopped (SIGSTOP)."""
    settings = RedisSettings.model_validate({"url": local_cluster.url, "cluster": True})
    client = build_redis(local_cluster.url, settings)
    metrics = Metrics()
    replicas = ReplicaWait(client, 1, 0.3, metrics)
    script = client.register_script(SCRIPT)
    key = b"dlq_bridge:alerted:{dead_letter:w}"
    await client.initialize()  # type: ignore[attr-defined]
    master = int(client.get_node_from_key(key).port)  # type: ignore[attr-defined]
    try:
        assert await replicas.script(script, [key], ["a"]) == 1
        assert waits(metrics, "ok") == 1
        stalled = local_cluster.procs[local_cluster.replica_of(master)]
        os.kill(stalled.pid, signal.SIGSTOP)
        try:
            assert await replicas.script(script, [key], ["b"]) == 2, "the write itself is done"
        finally:
            os.kill(stalled.pid, signal.SIGCONT)
        assert waits(metrics, "timeout") == 1
        forwarded = await replicas.pipeline(lambda pipe: pipe.lpush(key, "c"), [key])
        assert forwarded == [3] and waits(metrics, "ok") == 2
    finally:
        await client.aclose()
