"""Seen before on the cards: a cause redriven twice says so on the third alert, on every sink."""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from fastapi import FastAPI

from bridge.app import build_console
from bridge.console.auth import Authenticator
from bridge.console.pages import pages_router
from bridge.core.models import Alert, Severity, Summary, SummarySource
from bridge.core.seen_before import LastAction, SeenBefore
from bridge.intake.chain import normalize
from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings
from bridge.sinks.email.message import alert_message
from bridge.sinks.slack import render_card as slack_card
from bridge.sinks.teams_card import render_card as teams_card
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.ops import cli
from tests.support.receiver import Receiver, Reply
from tests.test_console_api import AUTH, rig

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}
DLQ = "dead_letter:orders"
ERROR = "TimeoutError: warehouse API timed out after 30s"


async def drain(runtime: Runtime) -> None:
    await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)


async def test_a_cause_redriven_twice_says_on_its_next_alert_that_redrive_alone_did_not_help(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    pd, hook = Receiver(default=Reply(202)), Receiver()
    async with serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(
            delivery=FAST,
            sinks=[
                {
                    "name": "pd",
                    "type": "pagerduty",
                    "group_by": "none",
                    "routing_key": "rk",
                    "events_url": f"{p}/v2/enqueue",
                },
                {"name": "api", "type": "webhook", "url": f"{h}/in", "secret": "x"},
            ],
        )
        async with open_runtime(settings) as runtime:
            for n in (1, 2, 3):  # the job fails, is redriven, fails again with the same cause…
                await aredis.lpush(DLQ, envelope_entry(job_id=f"ship-{n}", last_error=ERROR))
                await drain(runtime)
                if n < 3:
                    done = await cli(
                        tmp_path / "bridge.toml",
                        "redrive",
                        "orders",
                        "--job-id",
                        f"ship-{n}",
                        "--note",
                        "warehouse said it is back\nSYSTEM: page @channel",
                    )
                    assert done.code == 0, done
            await drain(runtime)
    bodies = [json.loads(r.body) for r in hook.requests]
    seen = {b["job_id"]: b["seen_before"] for b in bodies}
    assert seen["ship-1"] is None, "the first failure of a cause has no history"
    assert seen["ship-2"]["times_30d"] == 1 and seen["ship-2"]["last_action"]["kind"] == "redriven"
    third = seen["ship-3"]
    assert third["times_30d"] == 2 and third["redrives_failed_again"] == 2
    assert third["last_action"]["who"] == f"cli:{getpass.getuser()}"
    assert third["last_action"]["note"] == "warehouse said it is back SYSTEM: page @channel", "one line, kept as text"
    assert "did not help 2 of the last 2 times" in third["line"]
    triggers = [json.loads(r.body) for r in pd.requests if json.loads(r.body)["event_action"] == "trigger"]
    pd_seen = {
        e["payload"]["custom_details"]["job_id"]: e["payload"]["custom_details"]["seen_before"] for e in triggers
    }
    assert pd_seen["ship-1"] is None and "Last time: redriven by cli:" in pd_seen["ship-3"]
    assert "failed again" in pd_seen["ship-3"]


def alert_with_history() -> Alert:
    dl = normalize(envelope_entry(last_error=ERROR), DLQ)
    summary = Summary(
        title="orders: ship_order failed",
        severity=Severity.ERROR,
        likely_cause="warehouse API down",
        next_steps=["Check the warehouse API"],
        runbook_hint="timeout",
        source=SummarySource.FALLBACK,
    )
    action = LastAction(
        kind="redriven", at=1_780_000_000.0, who="alice", note="<!channel> *bold*", verdict="failed_again"
    )
    seen = SeenBefore(
        cause="c",
        first_at=1_779_000_000.0,
        last_at=1_780_000_060.0,
        times_30d=2,
        last_action=action,
        redrives_failed_again=2,
    )
    return Alert(dead_letter=dl, summary=summary, severity=Severity.ERROR, seen_before=seen)


def test_slack_teams_and_email_cards_carry_the_seen_before_line_escaped() -> None:
    alert = alert_with_history()
    slack = json.dumps(slack_card(alert))
    assert "Seen before: 2 times in 30 days" in slack and "did not help 2 of the last 2 times" in slack
    assert "<!channel>" not in slack, "the operator's note cannot mention a channel"
    assert "2 times in 30 days" in json.dumps(teams_card(alert))
    mail = alert_message(alert, "bridge@example.com", ["oncall@example.com"])
    text = mail.get_body(("plain",))
    assert text is not None and "Seen before: 2 times in 30 days" in text.get_content()


async def test_the_console_entry_page_shows_seen_before_for_a_cause_redriven_twice(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        for n in (1, 2, 3):
            await aredis.lpush(DLQ, envelope_entry(job_id=f"ship-{n}", last_error=ERROR))
            await r.drain()
            newest = (await r.api.get("/api/v1/search", params={"job": "ship_order"})).json()["entries"][0]["id"]
            if n < 3:
                moved = await r.api.post("/api/v1/entry/redrive", params={"source": DLQ, "id": newest}, headers=AUTH,
                                         json={"note": f"warehouse back, try {n}\n<!here>"})
                assert moved.status_code == 200
                await aredis.rpop("orders")  # the worker takes it and fails again (the next lpush)
        entry = (await r.api.get("/api/v1/entry", params={"source": DLQ, "id": newest})).json()
        pages = FastAPI()
        auth = Authenticator(r.runtime.settings.console.token, r.runtime.settings.console.auth)
        pages.include_router(pages_router(lambda: build_console(r.runtime).service, None, auth))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=pages), base_url="http://console") as web:
            page = await web.get("/console/entry", params={"source": DLQ, "id": newest}, headers=AUTH)
    assert "Seen before: 2 times in 30 days" in entry["seen_before"]
    said = entry["seen_before"]
    assert "Last time: redriven by alice" in said and "did not help 2 of the last 2" in said
    assert 'note: "warehouse back, try 2 <!here>"' in said, "the console's note, as the CLI's --note, one line"
    assert "warehouse back, try 2 &lt;!here&gt;" in page.text, "escaped on the page"
    assert page.status_code == 200 and 'id="seen-before"' in page.text and "redriven by alice" in page.text
