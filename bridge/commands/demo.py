"""Sample dead letters of every shape, for `dlq-bridge demo`."""

from __future__ import annotations

import json
import time

import redis.asyncio as redis

from bridge.settings import Settings
from bridge.sources.kind_registry import KINDS

DEMO_MATCH = "dead_letter:demo-*"


def sample_entries() -> list[tuple[str, bytes]]:
    """(DLQ key, raw bytes) pairs: envelope, reliable-queue, garbage, secrets, array."""
    now = time.time()
    envelope = {
        "queue": "demo-payments",
        "job_id": "pay-20931",
        "job_name": "charge_card",
        "attempts": 5,
        "correlation_id": "req-7f3a9c",
        "last_error": "TimeoutError: POST https://psp.example/charges timed out after 30s",
        "first_failed_at": now - 600,
        "payload_excerpt": '{"amount": 4200, "currency": "EUR"}',
    }
    reliable = {"task_id": "t-5521", "job_type": "send_welcome_email", "params": {"user_id": 42}, "attempts": 3}
    secrets = {
        "queue": "demo-imports",
        "job_id": "imp-88",
        "job_name": "import_contacts",
        "attempts": 2,
        "last_error": "HTTP 401 Unauthorized from https://crm.example (api_key=sk_live_abcdefghijklmnop)",
        "payload_excerpt": json.dumps({"password": "hunter2", "url": "https://user:pw@crm.example"}),
    }
    return [
        ("dead_letter:demo-payments", json.dumps(envelope).encode()),
        ("dead_letter:demo-emails", json.dumps(reliable).encode()),
        ("dead_letter:demo-emails", b"\x80\x81 not json at all \xff"),
        ("dead_letter:demo-imports", json.dumps(secrets).encode()),
        ("dead_letter:demo-imports", json.dumps([1, 2, 3]).encode()),
    ]


def demo_settings(settings: Settings) -> Settings:
    """`settings` for a demo: always the embedded Redis, only the DLQs the demo seeds, no kind sources.

    Sinks and the gateway stay as configured (a demo shows what they would receive); a
    configured Redis and its real dead letters are never touched.
    """
    no_kinds: dict[str, object] = {kind: [] for kind in KINDS.names()}
    embedded = {"url": None, "url_env": None, "url_file": None, "cluster": False, "wait_replicas": 0}
    redis_settings = settings.redis.model_copy(update=embedded)
    sources = settings.sources.model_copy(update={"match": DEMO_MATCH, **no_kinds})
    return settings.model_copy(update={"redis": redis_settings, "sources": sources})


async def seed(client: redis.Redis) -> int:
    """LPUSH the samples the way producers do; returns how many were pushed."""
    entries = sample_entries()
    for key, raw in entries:
        await client.lpush(key, raw)
    return len(entries)
