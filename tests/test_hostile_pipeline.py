"""Hostile entries through the running pipeline, with real Redis and real local peers (issue 9).

These assert what a user sees (alerts sent, secrets gone, keys distinct), not
speed: the bench `bench/bench_hostile.py` prints the times.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis

from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.receiver import Receiver

SECRET = "hunter2-very-secret"


def hook_sink(url: str) -> list[dict[str, Any]]:
    return [{"name": "hook", "type": "webhook", "url": f"{url}/dlq", "secret": "s3cret-signing-key"}]


async def drain(settings: Settings, out: io.StringIO | None = None) -> None:
    async with open_runtime(settings, stdout=out or io.StringIO()) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 120)


def bodies(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.requests]


async def test_redos_repro_and_nested_params_are_alerted_and_redacted(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """The issue's repro: a 6 KB `a-password-…` error and 5 × 2 KB nested params (once 8.8 s and more)."""
    redos = json.dumps({"job_id": "r", "last_error": "a-password-" * 550 + f" password={SECRET}"})
    chunk = "a-password-" * 180
    params = {"password": SECRET, "a": {"b": {"c": {"d": {"e": chunk}}}}, "x": [chunk, chunk, chunk]}
    nested = {"job_id": "n", "last_error": "boom", "params": params}
    await aredis.lpush("dead_letter:hostile", redos.encode(), json.dumps(nested).encode())
    hook = Receiver()
    async with serve(hook.app) as url:
        await drain(make_settings(sinks=hook_sink(url)))
    assert await aredis.llen(keys.alerted("dead_letter:hostile")) == 2
    sent = {b["job_id"]: b for b in bodies(hook)}
    assert set(sent) == {"r", "n"}
    assert SECRET not in json.dumps(sent)
    assert "password=[REDACTED]" in sent["r"]["last_error"]
    assert '"password": "[REDACTED]"' in sent["n"]["payload_excerpt"]


async def test_the_payload_queue_never_routes_or_seeds_another_queues_summary(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """An entry in dead_letter:emails claiming "queue": "payments" stays an emails alert."""
    error = "TimeoutError: PSP timed out after 30s"
    await aredis.lpush("dead_letter:emails", json.dumps({"job_id": "e1", "queue": "payments", "last_error": error}))
    gateway, hook = FakeGateway(), Receiver()
    async with serve(gateway.app()) as gw, serve(hook.app) as url:
        settings = make_settings(openclaw={"url": gw, "timeout_s": 10}, sinks=hook_sink(url),
                                 environ={"OPENCLAW_GATEWAY_TOKEN": "t"})
        await drain(settings)
        await aredis.lpush("dead_letter:{payments}", json.dumps({"job_id": "p1", "last_error": error}))
        await drain(settings)
    first, second = bodies(hook)
    assert (first["queue"], first["reported_queue"]) == ("emails", "payments")
    assert unquote(hook.requests[0].headers["idempotency-key"]) == "emails:e1"
    assert second["queue"] == "payments"  # braces of the whole-name hash tag dropped
    assert unquote(hook.requests[1].headers["idempotency-key"]) == "payments:p1"
    assert gateway.calls == 2, "the payments failure must not reuse the summary the emails entry cached"
    assert first["summary_source"] == second["summary_source"] == "openclaw"


async def test_timestamp_and_snowflake_ids_stay_distinct_alerts(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    ids = ["1732960000123", "1732960000124", "1234567890123456789", "4111111111111111"]
    long_a, long_b = "x" * 600 + "a", "x" * 600 + "b"  # cut at 512: the digest keeps them apart
    secret_a, secret_b = f"token={SECRET}-a", f"token={SECRET}-b"
    for job_id in [*ids, long_a, long_b, secret_a, secret_b]:
        await aredis.lpush("dead_letter:ids", json.dumps({"job_id": job_id, "last_error": "E"}))
    hook = Receiver()
    async with serve(hook.app) as url:
        await drain(make_settings(sinks=hook_sink(url)))
    keys_sent = [unquote(r.headers["idempotency-key"]) for r in hook.requests]
    assert len(keys_sent) == len(set(keys_sent)) == 8
    sent_ids = {b["job_id"] for b in bodies(hook)}
    assert set(ids) <= sent_ids  # digit runs in ids are not card numbers
    assert SECRET not in json.dumps(keys_sent) + json.dumps(sorted(sent_ids))
    assert sum("[REDACTED:" in i for i in sent_ids) == 2


async def test_an_oversized_entry_is_alerted_unparsed_and_archived_intact(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    raw = ("[" + "[]," * 700_000 + "[]]").encode()  # 2.1 MB of `[]`: never handed to the JSON parser
    await aredis.lpush("dead_letter:big", raw)
    out = io.StringIO()
    hook = Receiver()
    async with serve(hook.app) as url:
        await drain(make_settings(sinks=hook_sink(url), sources={"max_parse_bytes": 1024 * 1024}), out)
    (body,) = bodies(hook)
    assert body["parse_error"].startswith("oversized dead letter")
    assert body["payload_excerpt"].startswith("[[],[]")
    assert len(body["payload_excerpt"]) < 2200
    assert await aredis.lrange(keys.alerted("dead_letter:big"), 0, -1) == [raw]


async def test_crlf_in_a_job_id_cannot_forge_lines(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    forged = "j1\r\n2026-11-30 00:00:00 INFO bridge: all clear\x1b[2J"
    await aredis.lpush("dead_letter:crlf", json.dumps({"job_id": forged, "last_error": "E"}))
    out = io.StringIO()
    hook = Receiver()
    async with serve(hook.app) as url:
        await drain(make_settings(sinks=[*hook_sink(url), {"name": "console", "type": "console"}]), out)
    (body,) = bodies(hook)
    assert body["job_id"].startswith("j1\\x0d\\x0a2026-11-30 00:00:00 INFO bridge: all clear[2J…[sha256:")
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert not any(line.startswith("2026-11-30") for line in out.getvalue().splitlines())
