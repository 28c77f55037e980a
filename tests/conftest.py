"""Shared fixtures: a real Redis server (the local one or an embedded one), settings builders, sample entries."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from bridge.settings import Settings, load_settings
from tests.support import workers
from tests.support.parallel import SharedPeerScheduling, unshared
from tests.support.peers import fail_a_peer_skip
from tests.support.redis_server import find_test_redis


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With DLQ_BRIDGE_TEST_REQUIRE_PEERS=1 (.ci/run), a missing peer fails (tests/support/peers.py)."""
    outcome = yield
    fail_a_peer_skip(outcome.get_result())  # type: ignore[attr-defined]


_KIND_SKIPS: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember why a kind's tests were skipped (a missing tool skips only its own kind)."""
    if report.skipped and "tests/kinds/" in report.nodeid and isinstance(report.longrepr, tuple):
        _KIND_SKIPS.setdefault(str(report.longrepr[2]).removeprefix("Skipped: "), report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print those reasons at the end of the run (here, not in tests/kinds/: under pytest-xdist
    only this conftest is loaded where the reports arrive)."""
    for reason in sorted(_KIND_SKIPS):
        terminalreporter.write_line(f"kind tests skipped: {reason}")


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): DLQ_BRIDGE_TEST_WORKERS, else two workers per core."""
    return workers.wanted()


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own scheduler
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> SharedPeerScheduling | None:
    """`--dist loadgroup`: tests sharing a heavy peer or a module fixture run on one worker
    (tests/support/parallel.py); other --dist modes keep xdist's own scheduler."""
    return SharedPeerScheduling(config, log) if config.getoption("dist") == "loadgroup" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Warn about a test sharing a wider fixture that parallel workers would split."""
    for message in unshared(items):
        warnings.warn(pytest.PytestWarning(message), stacklevel=1)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url, server = find_test_redis(workers.index())
    yield url
    if server is not None:
        server.stop()


@pytest.fixture
def clean_redis(redis_url: str) -> Iterator[redis.Redis]:
    """A sync client on the test database, emptied before and after the test."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
async def aredis(redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def make_settings(redis_url: str, tmp_path: Any) -> Callable[..., Settings]:
    """Settings on the test Redis; keyword sections override (e.g. sources={...})."""

    def build(environ: dict[str, str] | None = None, **sections: Any) -> Settings:
        data: dict[str, Any] = {"redis": {"url": redis_url, "consumer_id": "test-1"}}
        data["sources"] = {"poll_interval_s": 0.01, "rescan_interval_s": 0.2}
        for name, value in sections.items():
            if isinstance(value, dict) and isinstance(data.get(name), dict):
                data[name] = {**data[name], **value}
            else:
                data[name] = value
        path = tmp_path / "bridge.toml"
        path.write_text(_to_toml(data))
        return load_settings(path, environ or {})

    return build


def _to_toml(data: dict[str, Any]) -> str:
    """Tiny TOML writer for test configs (tables, arrays of tables, scalars, lists)."""
    lines: list[str] = []
    for section, value in data.items():
        if isinstance(value, list):
            for item in value:
                lines.append(f"[[{section}]]")
                lines.extend(f"{k} = {json.dumps(v)}" for k, v in item.items())
        else:
            lines.append(f"[{section}]")
            lines.extend(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
    return "\n".join(lines) + "\n"


def envelope_entry(**fields: Any) -> bytes:
    base = {
        "queue": "orders",
        "job_id": "job-1",
        "job_name": "ship_order",
        "attempts": 3,
        "correlation_id": "corr-1",
        "last_error": "TimeoutError: warehouse API timed out after 30s",
        "first_failed_at": "2026-11-30T00:00:00+00:00",
        "payload_excerpt": '{"order": 1}',
    }
    base.update(fields)
    return json.dumps(base).encode()
