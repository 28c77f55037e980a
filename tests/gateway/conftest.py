"""Fixtures for the real-gateway tests: the fake model provider and the real OpenClaw gateway.

The gateway starts once per session (about 10-20 s, plus a slow first call
that the fixture makes as a warm-up). When Node 24 or openclaw is not
installed, every test here skips with the reason.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_model import FakeModel
from tests.support.http_server import ThreadedServer
from tests.support.openclaw_gateway import Gateway, chat_body, find_gateway, http_status, start_gateway

TOKEN = "gw-token-real-1"


@pytest.fixture(scope="session")
def gateway_missing() -> str:
    reason = find_gateway()
    if reason:
        print(f"\nreal-gateway tests skipped: {reason}")
    return reason


@pytest.fixture(scope="session")
def fake_model_server(gateway_missing: str) -> Iterator[tuple[FakeModel, str]]:
    if gateway_missing:
        pytest.skip(gateway_missing)
    model = FakeModel()
    with ThreadedServer(model.app()) as server:
        yield model, server.url


@pytest.fixture
def fake_model(fake_model_server: tuple[FakeModel, str]) -> Iterator[FakeModel]:
    model = fake_model_server[0]
    model.reset()
    yield model
    model.reset()


@pytest.fixture(scope="session")
def gateway_workdir() -> Iterator[Path]:
    """A private folder for the gateways' state (not pytest's tmp: other sessions prune that)."""
    path = Path(tempfile.mkdtemp(prefix="dlq-bridge-openclaw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def real_gateway(fake_model_server: tuple[FakeModel, str], gateway_workdir: Path) -> Iterator[Gateway]:
    """The gateway with the shipped hardened config, warmed up by one chat completion."""
    model, url = fake_model_server
    gateway = start_gateway(url, gateway_workdir / "on", token=TOKEN)
    try:
        started = time.monotonic()
        status = http_status(gateway, "POST", "/v1/chat/completions", chat_body("warm-up"), timeout_s=300)
        assert status == 200, f"warm-up call answered {status}:\n{gateway.log[-3000:]}"
        print(f"\nreal gateway: first call {time.monotonic() - started:.1f}s")
        model.reset()
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture(scope="session")
def gateway_without_endpoint(
    fake_model_server: tuple[FakeModel, str], gateway_workdir: Path
) -> Iterator[Gateway]:
    """The same config with `gateway.http.endpoints.chatCompletions.enabled: false`."""
    gateway = start_gateway(fake_model_server[1], gateway_workdir / "off", token=TOKEN, chat_endpoint=False)
    try:
        yield gateway
    finally:
        gateway.stop()
