"""Fixtures for the real-model tests: our model server (node-llama-cpp, Qwen2.5-Coder 1.5B) and the gateway.

Installed by `scripts/install-model` (and `scripts/install-gateway` for the
gateway case); without them every test here skips with the reason. The model
server and the gateway start once per session; a CPU model is slow, so the
tests give the model generous timeouts and send few dead letters.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.intake.chain import normalize
from bridge.summarize.prompt import build_messages, load_system_prompt
from tests.conftest import envelope_entry
from tests.support.model_server import ModelServer, find_model, start_model_server
from tests.support.openclaw_gateway import Gateway, find_gateway, start_gateway

TOKEN = "gw-token-real-model-1"
WARM_UP_TIMEOUT_S = 1200  # the cold call evaluates the whole system prompt: 25-35 s idle, minutes on a busy machine


def warm_up(url: str) -> float:
    """One bridge-shaped call, so the tests time warm calls (the prompt prefix is then cached)."""
    dl = normalize(envelope_entry(job_id="warm-up", last_error="TimeoutError: warm-up"), "dead_letter:warm")
    body = {"model": "openclaw/dlq-summarizer", "temperature": 0, "stream": False,
            "messages": build_messages(load_system_prompt(), dl)}
    headers = {"Content-Type": "application/json", "x-openclaw-agent-id": "dlq-summarizer"}
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers)
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=WARM_UP_TIMEOUT_S) as response:
        response.read()
    took = time.monotonic() - started
    print(f"\nreal model warm-up: {took:.1f}s")
    return took


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
        warm_up(server.url)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def model_gateway(model_server: ModelServer, model_workdir: Path) -> Iterator[Gateway]:
    reason = find_gateway()
    if reason:
        pytest.skip(reason)
    gateway = start_gateway(model_server.url, model_workdir / "gateway", token=TOKEN)
    try:  # no warm-up: the one test through it pays the cold prompt within its own timeout
        yield gateway
    finally:
        gateway.stop()
