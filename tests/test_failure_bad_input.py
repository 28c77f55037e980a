"""The bad-input corpus through the whole pipeline, with every sink and the gateway live.

Each nasty entry becomes an alert (or a clear undeliverable record): no crash, no hang,
no planted secret in any output — stdout cards, logs, gateway prompts, Slack, PagerDuty,
webhook bodies, undeliverable records or /healthz.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest
import redis.asyncio as aioredis

from bridge.intake.envelope import raw_digest
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.corpus_gen import PLANTED_SECRETS, corpus
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

pytestmark = pytest.mark.failure

SOURCE = "dead_letter:corpus"


def parroting_reply(envelope: dict[str, Any]) -> str:
    """A worst-case model: it copies the (already redacted) error into its answer."""
    error = str(envelope.get("last_error") or envelope.get("parse_error") or "none")
    return json.dumps(
        {
            "title": f"{envelope.get('queue')}: {str(envelope.get('job_name'))[:40]} <!channel>",
            "severity": "error",
            "likely_cause": error[:480] or "none",
            "next_steps": ["Check https://evil.example/steal", "Ignore this <!here>"],
            "runbook_hint": "",
        }
    )


def sink_config(slack: str, pd: str, hook: str) -> list[dict[str, Any]]:
    return [
        {"name": "console", "type": "console"},
        {"name": "slack", "type": "slack", "url": f"{slack}/services/T/B/X", "messages_per_second": 1000},
        {
            "name": "pd",
            "type": "pagerduty",
            "routing_key": "R" * 32,
            "events_url": f"{pd}/v2/enqueue",
            "events_per_minute": 60000,
        },
        {"name": "hook", "type": "webhook", "url": f"{hook}/dlq", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
    ]


async def test_every_nasty_entry_becomes_an_alert_and_no_secret_leaks(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    entries = corpus()
    for raw in entries.values():
        await aredis.lpush(SOURCE, raw)
    gateway = FakeGateway(responder=parroting_reply)
    slack, pd, hook = Receiver(), Receiver(default=Reply(status=202)), Receiver()
    out = io.StringIO()
    async with serve(gateway.app()) as gw, serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(
            openclaw={"url": gw, "timeout_s": 10},
            sinks=sink_config(s, p, h),
            delivery={"base_delay_s": 0.05, "max_delay_s": 0.5, "request_timeout_s": 10},
            environ={"OPENCLAW_GATEWAY_TOKEN": "gw-token-corpus"},
        )
        async with open_runtime(settings, stdout=out) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 120)
            health = json.dumps(runtime.health.snapshot())

    assert await aredis.llen(keys.alerted(SOURCE)) == len(entries)
    assert await aredis.llen(SOURCE) == 0
    undeliverable = await aredis.lrange(keys.UNDELIVERABLE, 0, -1)
    # per entry (retries do not count twice): delivered to the webhook, or recorded as undeliverable there
    delivered = {json.loads(r.body)["raw_digest"] for r in hook.requests if 200 <= r.status < 300}
    recorded = {rec["raw_digest"] for rec in map(json.loads, undeliverable) if rec.get("sink") == "hook"}
    missing = [name for name, raw in entries.items() if raw_digest(raw) not in delivered | recorded]
    assert not missing, f"neither delivered nor recorded: {missing}"
    assert out.getvalue().count("dlq-bridge alert") == len(entries)

    outputs = {
        "stdout": out.getvalue(),
        "logs": caplog.text,
        "gateway": b"".join(gateway.bodies).decode("utf-8", "replace"),
        "slack": b"".join(r.body for r in slack.requests).decode("utf-8", "replace"),
        "pagerduty": b"".join(r.body for r in pd.requests).decode("utf-8", "replace"),
        "webhook": b"".join(r.body for r in hook.requests).decode("utf-8", "replace"),
        "undeliverable": b"".join(undeliverable).decode("utf-8", "replace"),
        "healthz": health,
    }
    for where, text in outputs.items():
        for secret in PLANTED_SECRETS:
            assert secret not in text, f"{secret!r} leaked into {where}"
        assert "gw-token-corpus" not in text
        if where != "pagerduty":  # the routing key belongs in PagerDuty's own request body only
            assert "R" * 32 not in text, f"routing key leaked into {where}"
    for body in (r.body for r in slack.requests):
        card = body.decode()
        assert "<!channel>" not in card and "<!here>" not in card and "<!everyone>" not in card
        assert "<https://evil.example" not in card
    for request in hook.requests:
        sent = json.loads(request.body)
        assert set(sent["summary"]) == {"title", "severity", "likely_cause", "next_steps", "runbook_hint", "repairs"}
        # non-ASCII ids travel percent-encoded (HTTP headers are ASCII)
        assert unquote(request.headers["idempotency-key"]) == f"{sent['queue']}:{sent['job_id']}"
