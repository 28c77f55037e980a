"""`[redis] wait_replicas` on one server (bridge/clients/replicas.py)."""

from __future__ import annotations

import redis.asyncio as aioredis

from bridge.clients.replicas import ReplicaWait
from bridge.core.metrics import Metrics

SCRIPT = "redis.call('LPUSH', KEYS[1], ARGV[1]) return redis.call('LLEN', KEYS[1])"


async def test_without_replicas_the_write_is_done_and_the_short_wait_counted(aredis: aioredis.Redis) -> None:
    """A server without replicas never satisfies WAIT 1: the bridge carries on after the timeout."""
    metrics = Metrics()
    replicas = ReplicaWait(aredis, 1, 0.05, metrics)
    script = aredis.register_script(SCRIPT)
    await aredis.script_flush()  # the first call meets NOSCRIPT and loads it
    assert await replicas.script(script, [b"l"], ["x"]) == 1
    assert await replicas.pipeline(lambda pipe: pipe.lpush("l", "y"), ["l"]) == [2]
    assert metrics.replica_waits.labels("timeout")._value.get() == 2
    assert await aredis.lrange("l", 0, -1) == [b"y", b"x"]


async def waits_served(client: aioredis.Redis) -> int:
    """How many WAIT commands the server has run (its own count: INFO commandstats)."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


async def test_wait_replicas_0_sends_no_wait(aredis: aioredis.Redis) -> None:
    metrics = Metrics()
    await aredis.config_resetstat()
    replicas = ReplicaWait(aredis, 0, 5.0, metrics)
    script = aredis.register_script(SCRIPT)
    assert await replicas.script(script, [b"l"], ["x"]) == 1
    assert await replicas.pipeline(lambda pipe: pipe.lpush("l", "y"), ["l"]) == [2]
    assert metrics.replica_waits.labels("timeout")._value.get() == 0
    assert metrics.replica_waits.labels("ok")._value.get() == 0
    assert await waits_served(aredis) == 0, "the server saw no WAIT"
    replicas_on = ReplicaWait(aredis, 1, 0.01, metrics)  # the count does see a WAIT when one is sent
    await replicas_on.script(script, [b"l"], ["z"])
    assert await waits_served(aredis) == 1
