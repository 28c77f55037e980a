"""Routing is decided by configuration, never by what a producer (or the model) writes."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from bridge.core.models import Severity
from bridge.settings import SeveritySettings
from tests.support.bridge_process import start_bridge, wait_for, wait_healthz, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver, make_alert
from tests.support.redis_server import free_port

FAILURE = {"job_name": "charge_card", "attempts": 5, "last_error": "CardDeclined: issuer unavailable"}


@pytest.mark.parametrize(
    ("mode", "configured", "assessed", "routed"),
    [
        ("ignore", "critical", "info", "critical"),
        ("ignore", "warning", "critical", "warning"),
        ("raise_only", "warning", "critical", "critical"),
        ("raise_only", "critical", "info", "critical"),
        ("trust", "critical", "info", "info"),
    ],
)
def test_model_mode_decides_what_the_assessment_may_do(mode: str, configured: str, assessed: str, routed: str) -> None:
    settings = SeveritySettings.model_validate({"default": "info", "pay*": configured, "model": mode})
    assert settings.route("payments", Severity(assessed)) is Severity(routed)


def test_an_alert_built_without_a_routed_severity_uses_the_assessment() -> None:
    alert = make_alert(severity=Severity.WARNING)
    assert alert.severity is Severity.WARNING
    assert alert.model_copy(update={"severity": Severity.CRITICAL}).summary.severity is Severity.WARNING


def model_reply(envelope: dict[str, Any]) -> str:
    """The model calls everything `info`, except the entry asking to page someone."""
    severity = "critical" if envelope.get("job_id") == "page-me" else "info"
    return json.dumps({
        "title": f"{envelope.get('job_name')} failed (model)",
        "severity": severity,
        "likely_cause": "The model read the error.",
        "next_steps": ["Look at the issuer"],
        "runbook_hint": "",
    })


def test_a_producer_cannot_keep_payments_off_pagerduty_or_page_from_emails(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    gateway, pagerduty, hook, slack = FakeGateway(responder=model_reply), Receiver(), Receiver(), Receiver()
    port = free_port()
    with (
        ThreadedServer(gateway.app()) as gw,
        ThreadedServer(pagerduty.app) as pd,
        ThreadedServer(hook.app) as wh,
        ThreadedServer(slack.app) as sl,
    ):
        cfg = write_config(tmp_path / "b.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "route-1"},
            "sources": {"rescan_interval_s": 0.2},
            "severity": {"default": "warning", "payments*": "critical"},
            "openclaw": {"url": gw.url, "token": "t", "calls_per_minute": 0},
            "sinks": [
                {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{pd.url}/pd",
                 "min_severity": "error", "group_by": "none"},
                {"name": "hook", "type": "webhook", "url": f"{wh.url}/hook", "secret": "s"},
                {"name": "slack", "type": "slack", "url": f"{sl.url}/slack", "min_severity": "warning",
                 "messages_per_second": 50, "group_by": "none"},
            ],
        })
        proc = start_bridge(["--config", str(cfg), "run"])
        try:
            wait_healthz(port, proc)
            # The attack: an entry in emails claims to be payments, and the model calls it info.
            clean_redis.lpush("dead_letter:emails", json.dumps({**FAILURE, "queue": "payments", "job_id": "evil-1"}))
            assert wait_for(lambda: len(hook.requests) == 1, 20)
            for i in range(1, 4):
                clean_redis.lpush("dead_letter:payments", json.dumps({**FAILURE, "job_id": f"pay-{i}"}))
            # Its own cause (the fingerprint is per DLQ and cause), so the model is asked afresh.
            page_me = {**FAILURE, "job_id": "page-me", "last_error": "SMTPAuthError: relay refused the login"}
            clean_redis.lpush("dead_letter:emails", json.dumps(page_me))
            assert wait_for(lambda: len(hook.requests) == 5, 20)
            assert wait_for(lambda: len(pagerduty.requests) >= 3, 20)
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    hooks = {b["job_id"]: b for b in (json.loads(r.body) for r in hook.requests)}
    pages = {e["dedup_key"]: e for e in (json.loads(r.body) for r in pagerduty.requests)}
    for job in ("pay-1", "pay-2", "pay-3"):
        assert pages[job]["payload"]["severity"] == "critical", "real payment failures still page"
        assert hooks[job]["severity"] == "critical" and hooks[job]["summary"]["severity"] == "info"
    assert "page-me" not in pages, "the model's `critical` does not page from a warning queue"
    assert hooks["page-me"]["severity"] == "warning" and hooks["page-me"]["summary"]["severity"] == "critical"
    evil = hooks["evil-1"]
    assert evil["queue"] == "emails", "filed under the DLQ it came from, not the payload's `queue`"
    assert evil["severity"] == "warning", "routed by the configured severity of emails, not payments'"
    assert "evil-1" not in pages, "the spoofing job is not paged"
    assert set(pages) == {"pay-1", "pay-2", "pay-3"}
    cards = [json.loads(r.body) for r in slack.requests]
    pay_cards = [json.dumps(c) for c in cards if "pay-1" in json.dumps(c)]
    assert pay_cards and "CRITICAL (assessed info)" in pay_cards[0]
