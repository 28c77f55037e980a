"""Fixtures for the real-model tests: our model server (node-llama-cpp, Qwen2.5-Coder 1.5B) and the gateway.

Installed by `scripts/install-model` (and `scripts/install-gateway` for the
gateway case); without them every test here skips with the reason. The model
server and the gateway start once per session; a CPU model is slow, so the
tests give the model generous timeouts and send few dead letters.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_server import ModelServer, find_model, start_model_server
from tests.support.openclaw_gateway import Gateway, find_gateway, start_gateway

TOKEN = "gw-token-real-model-1"


@pytest.fixture(scope="session")
def model_workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dlq-bridge-model-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def model_server(model_workdir: Path) -> Iterator[ModelServer]:
    reason = find_model("qwen15")
    if reason:
        pytest.skip(reason)
    server = start_model_server(model_workdir / "model", "qwen15")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def model_gateway(model_server: ModelServer, model_workdir: Path) -> Iterator[Gateway]:
    reason = find_gateway()
    if reason:
        pytest.skip(reason)
    gateway = start_gateway(model_server.url, model_workdir / "gateway", token=TOKEN)
    try:
        yield gateway
    finally:
        gateway.stop()
