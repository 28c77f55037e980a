"""`dlq-bridge summarize`: a dry run that shows the summary and cards and sends nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from bridge.cli import build_parser, main
from bridge.commands.summarize import run_async
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve

TOKEN = "gw-token-cli-0001"


def test_file_without_openclaw_prints_fallback_and_console_card(
    make_settings: Callable[..., Settings], clean_redis: redis.Redis, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_settings()  # writes tmp_path/bridge.toml on the test Redis
    entry = tmp_path / "entry.json"
    entry.write_bytes(envelope_entry(last_error="TimeoutError: timed out, password=hunter2"))
    code = main(["--config", str(tmp_path / "bridge.toml"), "summarize", "--file", str(entry), "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["source"] == "fallback" and doc["summary"]["fallback_reason"] == "disabled"
    assert doc["summary"]["title"] == "manual: ship_order failed after 3 attempts"
    assert [s["sink"] for s in doc["sinks"]] == ["console"]
    assert "manual: ship_order failed after 3 attempts" in doc["sinks"][0]["body"]["card"]
    assert "hunter2" not in json.dumps(doc)


def test_stdin_and_unreadable_file(
    make_settings: Callable[..., Settings], clean_redis: redis.Redis, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_settings()
    config = str(tmp_path / "bridge.toml")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe not json")))
    assert main(["--config", config, "summarize", "-"]) == 0
    out = capsys.readouterr().out
    assert "unparseable dead letter" in out and "would send, not sent" in out
    assert main(["--config", config, "summarize", "--file", str(tmp_path / "missing.json")]) == 4
    assert "missing.json does not exist" in capsys.readouterr().err


async def test_queue_entry_with_gateway_renders_sinks_and_sends_nothing(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway()
    received: list[Any] = []
    receiver = FastAPI()

    @receiver.post("/{path:path}")
    async def hook(path: str, request: Request) -> dict[str, str]:
        received.append(path)
        return {}

    source = "dead_letter:orders"
    await aredis.lpush(source, envelope_entry(job_id="oldest"))
    await aredis.lpush(source, envelope_entry(job_id="newest"))
    async with serve(gateway.app()) as gw_url, serve(receiver) as hook_url:
        settings = make_settings(
            openclaw={"url": gw_url},
            sinks=[{"name": "hook", "type": "webhook", "url": f"{hook_url}/h", "secret": "s3cret-0123"},
                   {"name": "quiet", "type": "console", "min_severity": "critical"}],
            environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN},
        )
        out = io.StringIO()
        args = build_parser().parse_args(["summarize", "--queue", "orders", "--json"])
        assert await run_async(settings, args, out) == 0
    doc = json.loads(out.getvalue())
    assert doc["entry"]["job_id"] == "oldest"  # the next to be claimed (right end)
    assert doc["summary"]["source"] == "openclaw"
    assert doc["summary"]["title"] == "orders: ship_order failed (model)"
    assert [s["sink"] for s in doc["sinks"]] == ["hook"]  # "quiet" does not route an error
    body = doc["sinks"][0]["body"]
    assert body["type"] == "dlq.alert" and body["job_id"] == "oldest"
    assert gateway.calls == 1 and received == []
    assert await aredis.llen(source) == 2  # nothing claimed
    assert await aredis.exists(keys.processing(source, "test-1")) == 0


async def test_empty_queue_fails(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    args = build_parser().parse_args(["summarize", "--queue", "nothing"])
    assert await run_async(make_settings(), args, io.StringIO()) == 4  # not found


async def test_summarize_writes_no_cache_unless_asked(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway()
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="cache-me"))
    async with serve(gateway.app()) as gw_url:
        settings = make_settings(openclaw={"url": gw_url}, environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN})
        for argv in (["summarize", "--queue", "orders", "--json"],) * 2:
            out = io.StringIO()
            assert await run_async(settings, build_parser().parse_args(argv), out) == 0
            assert json.loads(out.getvalue())["summary"]["source"] == "openclaw"
        assert gateway.calls == 2, "nothing cached: each dry run asks the gateway"
        assert await aredis.keys("dlq_bridge:summary:*") == []
        before = set(await aredis.keys("*"))
        out = io.StringIO()
        args = build_parser().parse_args(["summarize", "--queue", "orders", "--json", "--cache"])
        assert await run_async(settings, args, out) == 0
        fingerprint = json.loads(out.getvalue())["entry"]["fingerprint"]
        assert set(await aredis.keys("*")) - before == {keys.summary(fingerprint).encode()}
        out = io.StringIO()
        args = build_parser().parse_args(["summarize", "--queue", "orders", "--json"])
        assert await run_async(settings, args, out) == 0
    assert json.loads(out.getvalue())["summary"]["source"] == "cache", "reads still use the cache"
    assert gateway.calls == 3
