"""Slack incident cards: Block Kit that slack_sdk accepts, escaped, within limits, paced."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from slack_sdk.models.blocks import Block

from bridge.core.models import Severity, SummarySource
from bridge.settings import Settings
from bridge.sinks.slack import escape, render_card
from tests.support.http_server import serve
from tests.support.receiver import Receiver, dispatch, make_alert, open_delivery

HOSTILE = "<!channel> <!here> @here @channel <@U123> <#C999> <https://evil.example|click> & done"
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0}


def all_texts(card: dict[str, Any]) -> list[str]:
    texts = [card["text"]]
    for block in card["blocks"]:
        if "text" in block:
            texts.append(block["text"]["text"])
        texts.extend(f["text"] for f in block.get("fields", []))
        texts.extend(e["text"] for e in block.get("elements", []))
    return texts


def assert_valid_card(card: dict[str, Any]) -> None:
    """What Slack would accept: slack_sdk models parse and validate, limits kept."""
    assert isinstance(card["text"], str) and 0 < len(card["text"]) <= 3000
    assert 0 < len(card["blocks"]) <= 50
    for raw in card["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()
        if raw["type"] == "header":
            assert raw["text"]["type"] == "plain_text" and len(raw["text"]["text"]) <= 150
        if "text" in raw:
            assert len(raw["text"]["text"]) <= 3000
        assert len(raw.get("fields", [])) <= 10
        assert all(len(f["text"]) <= 2000 for f in raw.get("fields", []))
    assert "link_names" not in card and "parse" not in card


def assert_no_mentions(card: dict[str, Any]) -> None:
    for text in all_texts(card):
        for bad in ("<!", "<@", "<#", "<https://evil", "@here", "@channel"):
            assert bad not in text, f"{bad!r} got through in {text[:200]!r}"


def test_card_has_the_incident_facts() -> None:
    alert = make_alert(runbook_url="https://runbooks.example/timeouts.md")
    card = render_card(alert)
    assert_valid_card(card)
    flat = "\n".join(all_texts(card)) + card["blocks"][0]["text"]["text"]
    for fact in ("ship_order failed on orders", "ERROR", "orders", "ship_order", "job-1", "*Attempts*\n3",
                 "corr-1", "2026-11-30T00:00:00+00:00", "The warehouse API timed out.",
                 "1. Check the warehouse API status", "2. Redrive the job",
                 "<https://runbooks.example/timeouts.md|timeouts>", "static fallback (no gateway configured)"):
        assert fact in flat, fact
    assert "TEST" not in flat


def test_runbook_hint_is_shown_when_there_is_no_url() -> None:
    card = render_card(make_alert())
    assert any("*Runbook*\n`timeouts`" in t for t in all_texts(card))


def test_untrusted_text_cannot_mention_or_link() -> None:
    alert = make_alert(last_error=HOSTILE, job_name=HOSTILE, correlation_id=HOSTILE,
                       payload_excerpt=HOSTILE, queue="orders<!here>")
    card = render_card(alert)
    assert_valid_card(card)
    assert_no_mentions(card)
    assert any("&lt;!channel&gt;" in t for t in all_texts(card))
    assert all(b.get("text", {}).get("verbatim", True) for b in card["blocks"] if b["type"] == "section")


def test_model_output_is_escaped_too() -> None:
    alert = make_alert()
    summary = alert.summary.model_copy(update={"title": "<!channel> pay now", "likely_cause": HOSTILE,
                                               "next_steps": [HOSTILE], "source": SummarySource.OPENCLAW,
                                               "fallback_reason": None})
    card = render_card(alert.model_copy(update={"summary": summary}))
    assert_no_mentions(card)
    assert "&lt;!channel&gt; pay now" in card["blocks"][0]["text"]["text"]
    assert any("Summary: OpenClaw ·" in t for t in all_texts(card))


def test_a_megabyte_of_error_text_still_gives_a_valid_card() -> None:
    huge = ("<!channel> & <@U1> " * 60_000)[:1_000_000]
    alert = make_alert(last_error=huge, payload_excerpt=huge, job_id="j" * 5000, job_name="n" * 5000,
                       correlation_id="c" * 5000, queue="q" * 3000)
    card = render_card(alert)
    assert_valid_card(card)
    assert_no_mentions(card)
    assert len(json.dumps(card)) < 40_000
    for text in all_texts(card):  # cut cleanly: no half entity before the ellipsis
        assert "&am…" not in text and "&l…" not in text and "&…" not in text


def test_escape_handles_entities_and_broadcasts() -> None:
    assert escape("a & b < c > d") == "a &amp; b &lt; c &gt; d"
    assert escape("ping @Here and @everyone") == "ping @\u200bHere and @\u200beveryone"
    assert escape("mail me@hereford.example") == "mail me@hereford.example"


def test_test_alerts_are_clearly_marked() -> None:
    card = render_card(make_alert(is_test=True, severity=Severity.INFO))
    assert card["blocks"][0]["text"]["text"].startswith("[TEST]")
    assert card["text"].startswith("[TEST]")
    assert any("TEST alert" in t for t in all_texts(card))


async def test_card_reaches_a_slack_receiver_and_parses(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack-ops", "type": "slack", "url": f"{base}/services/T0/B0/SECRET"}])
        async with open_delivery(settings, aredis) as d:
            results = await dispatch(d.dispatcher, make_alert(last_error="x" * 1_000_000 + HOSTILE))
    assert [r.outcome for r in results] == ["delivered"]
    [request] = receiver.requests
    assert request.path == "services/T0/B0/SECRET"
    assert request.headers["content-type"] == "application/json"
    card = json.loads(request.body)
    assert_valid_card(card)
    assert_no_mentions(card)
    assert d.health.get("sink:slack-ops") is not None


async def test_slack_is_paced_per_webhook_without_slowing_other_sinks(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    slack, hook = Receiver(), Receiver()
    async with serve(slack.app) as slack_base, serve(hook.app) as hook_base:
        settings = make_settings(delivery=FAST, sinks=[
            {"name": "slack-a", "type": "slack", "url": f"{slack_base}/hook", "messages_per_second": 4},
            {"name": "slack-b", "type": "slack", "url": f"{slack_base}/hook", "messages_per_second": 4},
            {"name": "api", "type": "webhook", "url": f"{hook_base}/in", "secret": "s"},
        ])
        async with open_delivery(settings, aredis) as d:
            alerts = [make_alert(job_id=f"j{i}") for i in range(3)]
            await asyncio.gather(*(dispatch(d.dispatcher, a) for a in alerts))
    assert len(slack.requests) == 6 and len(hook.requests) == 3
    assert min(slack.gaps()) >= 0.2, f"two sinks on one webhook share one pace: {slack.gaps()}"
    # Order, not speed: every webhook request came before Slack's pace let its third message out.
    assert hook.requests[-1].at < sorted(r.at for r in slack.requests)[2], "the webhook must not wait for Slack's pace"
