"""Fixtures for the cluster tests: the same names as tests/conftest.py, on a local Redis Cluster.

`redis_url` names one node of a 6-node cluster (3 masters, 3 replicas) started once per
session (tests/support/redis_cluster.py); `clean_redis` and `aredis` are cluster clients,
flushed on every master around each test; every bridge a test starts as a subprocess
runs with `[redis] cluster = true` (the `DLQ_BRIDGE_REDIS__CLUSTER` variable), and
`make_settings` adds it to in-process settings. So tests written for one server run here
unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from bridge.settings import Settings
from tests.support.redis_cluster import LocalCluster, start_local_cluster


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    cluster = start_local_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def redis_url(local_cluster: LocalCluster) -> str:
    return local_cluster.url


@pytest.fixture(autouse=True)
def _bridges_use_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLQ_BRIDGE_REDIS__CLUSTER", "true")


@pytest.fixture
def clean_redis(local_cluster: LocalCluster) -> Iterator[RedisCluster]:
    """A sync cluster client, every master flushed before and after the test."""
    local_cluster.wait_ok()
    local_cluster.flush()
    client = RedisCluster.from_url(local_cluster.url)
    yield client
    client.close()
    local_cluster.wait_ok()  # a test may have failed a master over: flush the masters of now
    local_cluster.flush()


@pytest.fixture
async def aredis(local_cluster: LocalCluster, clean_redis: RedisCluster) -> AsyncIterator[AsyncRedisCluster]:
    client = AsyncRedisCluster.from_url(local_cluster.url)
    yield client
    await client.aclose()


@pytest.fixture
def make_settings(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """The suite's builder with `[redis] cluster = true`."""

    def build(environ: dict[str, str] | None = None, **sections: Any) -> Settings:
        redis_section = {"cluster": True, **sections.pop("redis", {})}
        return make_settings(environ, redis=redis_section, **sections)

    return build
