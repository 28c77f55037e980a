"""Finding a real Redis for tests: $DLQ_BRIDGE_TEST_REDIS_URL, the local server, or embedded."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from bridge.embedded import EmbeddedRedis, port_answers

TEST_DB = int(os.environ.get("DLQ_BRIDGE_TEST_REDIS_DB", "9"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_test_redis() -> tuple[str, EmbeddedRedis | None]:
    """A Redis URL for tests, and the embedded server to stop (if one was started)."""
    given = os.environ.get("DLQ_BRIDGE_TEST_REDIS_URL")
    if given:
        return given, None
    if port_answers(6379):
        return f"redis://127.0.0.1:6379/{TEST_DB}", None
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-redis-")), free_port(), appendonly=False)
    server.start()
    return f"redis://127.0.0.1:{server.port}/{TEST_DB}", server


def start_private_redis(appendonly: bool = True) -> EmbeddedRedis:
    """A throwaway server of our own, for tests that stop and restart Redis."""
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-private-")), free_port(), appendonly=appendonly)
    server.start()
    return server


def url_port(url: str) -> int:
    return urlsplit(url).port or 6379
