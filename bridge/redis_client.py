"""Building the redis.asyncio client the whole bridge shares."""

from __future__ import annotations

import redis.asyncio as redis

from bridge.settings import RedisSettings


def build_redis(url: str, settings: RedisSettings, max_connections: int = 64) -> redis.Redis:
    """A pooled client: callers wait for a free connection rather than fail.

    Commands fail fast while Redis is down; the loops that call them retry.
    """
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=settings.socket_timeout_s,
        socket_timeout=settings.socket_timeout_s,
        socket_connect_timeout=min(2.0, settings.socket_timeout_s),
        health_check_interval=15,
    )
    return redis.Redis(connection_pool=pool)
