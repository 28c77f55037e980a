"""schemathesis against the console API's own OpenAPI schema, on the real app (uvicorn, lifespan,
pipeline) over a seeded Redis: no 500s, every response as the schema says (docs/design.md, Console)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from bridge.app import create_app
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.redis_server import free_port

TOKEN = "fuzz-token"
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_headers_conformance, checks.response_schema_conformance]


@pytest.fixture
def served(make_settings: Callable[..., Settings], clean_redis: redis.Redis) -> Iterator[str]:
    """The whole app with the console on, its pipeline having finished a few seeded entries."""
    clean_redis.lpush("dead_letter:orders", envelope_entry(job_id="o1"), envelope_entry(job_id="<script>"))
    clean_redis.lpush("dead_letter:{carts}:eu", b"\xff not json", envelope_entry(job_id="c1"))
    clean_redis.lpush(keys.UNDELIVERABLE, json.dumps({"sink": "gone", "error": "HTTP 410", "at": 1.0}), "not json")
    settings_ = make_settings({"DLQ_BRIDGE_CONSOLE_TOKEN": TOKEN}, console={"enabled": True},
                              sinks=[{"name": "hook", "type": "webhook", "url": "http://127.0.0.1:9/x", "secret": "s",
                                      "group_by": "fingerprint"}],
                              delivery={"max_attempts": 1, "base_delay_s": 0.01})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings_), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and clean_redis.llen(keys.alerted("dead_letter:orders")) < 2:
        time.sleep(0.1)
    assert httpx.get(f"{base}/api/v1/overview", timeout=5).status_code == 200
    yield base
    server.should_exit = True
    thread.join(timeout=20)


def test_the_api_answers_every_generated_request_as_its_schema_says(served: str) -> None:
    schema = schemathesis.openapi.from_url(f"{served}/openapi.json").include(path_regex="^/api/v1/")
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Console-User": "fuzzer"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15

    for operation in operations:
        for sent in (headers, None):  # with the token, and without it (401 on every action)
            fuzz(operation, served, sent)


def fuzz(operation: schemathesis.APIOperation, base: str, headers: dict[str, str] | None) -> None:
    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base, headers=headers, checks=CHECKS, timeout=10)

    run()
