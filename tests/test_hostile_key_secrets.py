"""A secret in a DLQ's key name (`dead_letter:x:password=hunter2`) never leaves the bridge.

Key names are written by whoever creates the DLQ; they are untrusted text like a payload. The
bridge runs as a user runs it (a process, real Redis, a gateway and a webhook on loopback, the
console sink on stdout, debug logs); the secret is looked for in everything that leaves it.
"""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import redis
import redis.asyncio as aioredis

from bridge.core import names
from bridge.core.claimed import entry_digest
from bridge.core.models import Severity
from bridge.drain.quarantine import quarantine_alert
from bridge.intake.redact import redact_key_name
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

SECRET = "hunter2secretvalue"
SOURCES = [f"dead_letter:x:password={SECRET}", f"dead_letter:{{pay}}:token={SECRET}"]
# an entry whose consumer already died holding it (its return counter planted at quarantine_after):
# its next claim quarantines it, so the quarantine log line and alert carry the key name too
POISON = json.dumps({"job_id": "poisoned", "last_error": "crash"}).encode()


def test_a_secret_in_a_dlq_key_name_reaches_no_metric_log_card_prompt_or_body(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    gateway, hook = FakeGateway(), Receiver()
    port = free_port()
    stdout = tmp_path / "stdout"
    with ThreadedServer(gateway.app()) as gw, ThreadedServer(hook.app) as wh, stdout.open("wb") as out:
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port, "log_level": "debug"},
            "redis": {"url": redis_url, "consumer_id": "keys-1"},
            "sources": {"rescan_interval_s": 0.2, "quarantine_after": 1},
            "openclaw": {"url": gw.url, "token": "t", "calls_per_minute": 0},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{wh.url}/hook", "secret": "s"},
                      {"name": "console", "type": "console"}],
        })
        for n, source in enumerate(SOURCES):
            clean_redis.lpush(source, json.dumps({"job_id": f"k{n}", "last_error": "boom"}), b"\xffnot json")
        clean_redis.set(keys.claims(SOURCES[1], entry_digest(POISON)), 1)
        clean_redis.lpush(SOURCES[1], POISON)
        proc = start_bridge(["--config", str(cfg), "run"], stdout=out)
        try:
            wait_healthz(port, proc)
            assert wait_for(lambda: all(clean_redis.llen(keys.alerted(s)) == 2 for s in SOURCES), 20)
            assert wait_for(lambda: clean_redis.lrange(keys.quarantine(SOURCES[1]), 0, -1) == [POISON], 20)
            assert wait_for(lambda: len(hook.requests) == 5, 20)
            # one more entry while it runs, so the depth gauge has a series to show
            clean_redis.lpush(SOURCES[0], *[json.dumps({"job_id": f"w{i}"}) for i in range(3)])
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            health = httpx.get(f"http://127.0.0.1:{port}/healthz").text
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        logs = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    assert "dlq_bridge_dlq_depth{" in metrics, "the depth series is there, under a redacted name"
    assert "quarantining an entry of dead_letter:{pay}:" in logs, "the quarantine log line was written"
    assert any(b"quarantined:poisoned" in r.body for r in hook.requests), "the quarantine alert was sent"
    cards = stdout.read_text("utf-8", "replace")
    assert cards.count("dlq-bridge alert") >= 5
    leaving = {
        "/metrics": metrics,
        "/healthz": health,
        "logs": logs,
        "console cards": cards,
        "gateway requests": b"".join(gateway.bodies).decode("utf-8", "replace"),
        "webhook bodies": b"".join(r.body for r in hook.requests).decode("utf-8", "replace"),
        "undeliverable records": repr(clean_redis.lrange(keys.UNDELIVERABLE, 0, -1)),
    }
    leaks = [where for where, text in leaving.items() if SECRET in text]
    assert not leaks, f"the key name's secret reached {leaks}"


async def test_a_quarantine_alert_and_a_pipeline_record_hide_the_key_names_secret(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """The quarantine alert is built from the key name alone (the entry is not parsed); a pipeline
    error's record (an entry the pipeline failed on) keeps the name in the undeliverable store."""
    async with open_runtime(make_settings(), stdout=io.StringIO()) as runtime:
        for source in SOURCES:
            await runtime.pipeline.record_error(source, "ab" * 8, RuntimeError(f"failed on {source}"))
    records = [json.loads(raw) for raw in await aredis.lrange(keys.UNDELIVERABLE, 0, -1)]
    assert len(records) == 2 and all(r["sink"] == "pipeline" for r in records)
    assert not [r for r in records if SECRET in json.dumps(r)], "the pipeline record hides the secret"
    assert records[0]["source_key"] != records[1]["source_key"], "names stay distinct"
    alerts = [quarantine_alert(source, "ab" * 32, Severity.ERROR, "Quarantined") for source in SOURCES]
    dumped = [alert.model_dump_json() for alert in alerts]
    assert not [d for d in dumped if SECRET in d]
    assert alerts[0].dead_letter.source_key != alerts[1].dead_letter.source_key, "names stay distinct"
    assert redact_key_name(f"dead_letter:x:password={SECRET}2") != redact_key_name(SOURCES[0])
    assert redact_key_name("dead_letter:\xff\r\n") == names.display("dead_letter:\xff\r\n"), "escaped as before"
