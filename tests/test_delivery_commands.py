"""`dlq-bridge send-test` and `dlq-bridge undeliverable list|retry`, run as the real CLI."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from bridge.settings import Settings
from bridge.stores import keys
from tests.support.bridge_process import write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, dispatch, make_alert, open_delivery

SECRET_PATH = "services/T0/B0/VERYSECRETPATH"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 1}


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def config(tmp_path: Path, redis_url: str, sinks: list[dict[str, object]]) -> str:
    path = write_config(tmp_path / "cli.toml", {
        "redis": {"url": redis_url, "consumer_id": "cli-test"},
        "delivery": FAST,
        "sinks": sinks,
    })
    return str(path)


async def test_send_test_reports_each_sink_and_fails_when_one_fails(
    tmp_path: Path, redis_url: str, aredis: aioredis.Redis
) -> None:
    slack, api = Receiver(), Receiver(default=Reply(400, body="bad request"))
    async with serve(slack.app) as slack_base, serve(api.app) as api_base:
        cfg = config(tmp_path, redis_url, [
            {"name": "slack-ops", "type": "slack", "url": f"{slack_base}/{SECRET_PATH}"},
            {"name": "api", "type": "webhook", "url": f"{api_base}/in", "secret": "s", "min_severity": "critical"},
        ])
        code, out, err = await cli("--config", cfg, "send-test")
        only_code, only_out, _ = await cli("--config", cfg, "send-test", "--sink", "slack-ops")
    assert code == 1, err
    lines = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert "ok" in lines["slack-ops"].split() and "FAILED" in lines["api"] and "HTTP 400" in lines["api"]
    assert "VERYSECRETPATH" not in out + err
    assert only_code == 0 and "api" not in only_out
    card = json.loads(slack.requests[0].body)
    assert card["blocks"][0]["text"]["text"].startswith("[TEST]") and card["text"].startswith("[TEST]")
    body = json.loads(api.requests[0].body)
    assert body["test"] is True and body["queue"] == "dlq-bridge-test"
    assert [k async for k in aredis.scan_iter(match="dlq_bridge:delivered:*")] == []
    assert await aredis.llen(keys.UNDELIVERABLE) == 0


async def test_undeliverable_list_then_retry_removes_only_what_was_delivered(
    tmp_path: Path, redis_url: str, aredis: aioredis.Redis, make_settings: Callable[..., Settings]
) -> None:
    receiver = Receiver(default=Reply(503))
    async with serve(receiver.app) as base:
        sinks: list[dict[str, object]] = [
            {"name": "slack-ops", "type": "slack", "url": f"{base}/{SECRET_PATH}", "messages_per_second": 100}]
        settings = make_settings(delivery=FAST, sinks=sinks)
        async with open_delivery(settings, aredis) as d:
            await dispatch(d.dispatcher, make_alert(job_id="a"))
            await dispatch(d.dispatcher, make_alert(job_id="b"))
        await aredis.lpush(keys.UNDELIVERABLE, json.dumps({"sink": "pipeline", "error": "pipeline error: X"}))
        cfg = config(tmp_path, redis_url, sinks)

        code, listed, _ = await cli("--config", cfg, "undeliverable", "list")
        assert code == 0
        assert "orders:a" in listed and "orders:b" in listed and "503" in listed and "pipeline" in listed
        assert "VERYSECRETPATH" not in listed and "blocks" not in listed

        code, out, _ = await cli("--config", cfg, "undeliverable", "retry", "--sink", "slack-ops", "--attempts", "1")
        assert code == 1 and out.count("still failing") == 2
        assert await aredis.llen(keys.UNDELIVERABLE) == 3, "a failed retry keeps its record"

        receiver.default = Reply(200)
        before = len(receiver.requests)
        code, out, _ = await cli("--config", cfg, "undeliverable", "retry", "--sink", "slack-ops")
        assert code == 0, out
        assert "2 delivered" in out
    remaining = [json.loads(r) for r in await aredis.lrange(keys.UNDELIVERABLE, 0, -1)]
    assert [r["sink"] for r in remaining] == ["pipeline"]
    delivered = [json.loads(r.body)["text"] for r in receiver.requests[before:]]
    assert len(delivered) == 2 and {t.rsplit(" ", 1)[-1] for t in delivered} == {"a)", "b)"}
    assert await aredis.exists(keys.delivered("slack-ops", "orders:a", "0123456789abcdef")) == 1

    code, out, _ = await cli("--config", cfg, "undeliverable", "retry")
    assert code == 1 and "skipped" in out, "records without an alert are reported, not dropped"
    assert await aredis.llen(keys.UNDELIVERABLE) == 1
