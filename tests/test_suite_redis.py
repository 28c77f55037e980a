"""The suite owns its Redis: it never picks up, or flushes, a server it was not given."""

from __future__ import annotations

import pytest
import redis

from tests.support.redis_server import URL_ENV, NotEmptyError, find_test_redis, start_private_redis, url_port


def test_default_is_a_private_server_not_the_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    url, server = find_test_redis()
    try:
        assert server is not None
        assert url_port(url) == server.port != 6379
        assert redis.Redis.from_url(url).ping()
    finally:
        assert server is not None
        server.stop()


def test_a_named_database_holding_data_is_refused_and_left_intact(monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_private_redis(appendonly=False)
    try:
        url = f"redis://127.0.0.1:{server.port}/3"
        client = redis.Redis.from_url(url)
        client.set("users:precious", "do not flush me")
        monkeypatch.setenv(URL_ENV, url)
        with pytest.raises(NotEmptyError, match="holding 1 keys"):
            find_test_redis()
        assert client.get("users:precious") == b"do not flush me"
        client.close()
    finally:
        server.stop()


def test_a_named_empty_database_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_private_redis(appendonly=False)
    try:
        url = f"redis://127.0.0.1:{server.port}/4"
        monkeypatch.setenv(URL_ENV, url)
        assert find_test_redis() == (url, None)
    finally:
        server.stop()
