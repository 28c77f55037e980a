"""Group notifications as each sink renders and sends them (docs/design.md, section 5b)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import json
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from standardwebhooks import Webhook

from bridge.core.errors import SinkRetryable
from bridge.core.models import Alert, GroupJob, Notification, NotificationKind, Severity, SummarySource
from bridge.settings import PagerDutySinkSettings, SlackSinkSettings
from bridge.sinks.console import ConsoleSink
from bridge.sinks.pagerduty import PagerDutySink, dedup_key
from bridge.sinks.slack import SlackSink, render_group_card
from bridge.sinks.webhook import WebhookSink
from bridge.stores.groups import Grouper
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, make_alert
from tests.test_sinks_slack import HOSTILE, all_texts, assert_no_mentions, assert_valid_card

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
WHSEC = "whsec_" + base64.b64encode(b"incidents-api-signing-key-0001!!").decode()
OLD = "plain-old-secret"


def job_alert(n: int, *, queue: str = "orders", fp: str = "cause-a", **extra: Any) -> Alert:
    return make_alert(queue=queue, job_id=f"job-{n}", fingerprint=fp, **extra)


def notification(
    count: int,
    *,
    sequence: int = 1,
    new_count: int | None = None,
    queues: dict[str, int] | None = None,
    first: Alert | None = None,
    severity: Severity = Severity.ERROR,
    kind: NotificationKind | None = None,
) -> Notification:
    first = first or job_alert(0)
    queues = queues or {"orders": count}
    new = count if new_count is None else new_count
    jobs = [GroupJob.of(job_alert(i), T0 + i) for i in range(count - new, count)]
    if kind is None:
        kind = ("single" if count == 1 else "digest") if sequence == 1 else "digest"
    return Notification(
        sink="s", group_key="fp:cause-a", kind=kind,
        sequence=sequence, count=count, new_count=new,
        previous_at=None if sequence == 1 else T0 + 60, first_seen=T0, last_seen=T0 + 75,
        queues=sorted(queues, key=lambda q: -queues[q]), queue_counts=queues,
        sample_job_ids=[j.job_id for j in jobs[:10]], severity=severity, first=first,
        jobs=jobs, opened_at=T0, claim="t",
    )


def sinks(http: httpx.AsyncClient, base: str = "http://127.0.0.1:9") -> dict[str, Any]:
    return {
        "slack": SlackSink("team-slack", SecretStr(f"{base}/slack"), http, timeout_s=2),
        "pagerduty": PagerDutySink("pd", SecretStr("R0UTING"), f"{base}/pd", "dlq-bridge", http, 2),
        "webhook": WebhookSink("hook", f"{base}/hook", [WHSEC, OLD], http, 2),
        "console": ConsoleSink("console", io.StringIO(), color=False),
    }


@pytest.mark.parametrize("name", ["slack", "pagerduty", "webhook", "console"])
async def test_a_group_of_one_renders_exactly_like_the_single_card(name: str) -> None:
    first = job_alert(0, runbook_url="https://runbooks.example/t.md")
    n = notification(1, first=first)
    assert n.kind == "single" and n.ledger_key == first.idempotency_key
    async with httpx.AsyncClient() as http:
        sink = sinks(http)[name]
        assert sink.render_group(n) == sink.render(first)


def test_slack_digest_shows_what_on_call_needs() -> None:
    first = job_alert(0, runbook_url="https://runbooks.example/timeouts.md")
    n = notification(2990, queues={"orders": 2980, "billing": 10}, first=first)
    card = render_group_card(n)
    assert_valid_card(card)
    flat = "\n".join(all_texts(card))
    header = card["blocks"][0]["text"]["text"]
    assert header == "🔴 ship_order failed on orders · 2,990 jobs"
    assert "2,990 jobs failed with the same cause within 75 s." in flat
    assert "orders ×2,980 · billing ×10" in flat
    assert "2027-01-15 08:00:00 UTC" in flat and "2027-01-15 08:01:15 UTC" in flat  # first/last seen
    assert "*Sample jobs* (10 of 2,990)" in flat
    assert flat.count("`orders/job-") == 10
    assert "The warehouse API timed out." in flat and "Redrive the job" in flat
    assert "<https://runbooks.example/timeouts.md|timeouts>" in flat
    assert "Digest #1" in flat
    assert card["text"].startswith("[ERROR] ship_order failed on orders: 2,990 jobs failed")


def test_slack_later_digest_says_how_many_more_since_when() -> None:
    n = notification(7, sequence=2, new_count=5)
    flat = "\n".join(all_texts(render_group_card(n)))
    assert "*5 more since 2027-01-15 08:01:00 UTC, 7 in all.*" in flat
    assert "7 (5 new)" in flat and "Digest #2" in flat
    assert "*Sample jobs* (5 of 5 new)" in flat and "`orders/job-2`" in flat and "job-1`" not in flat


def test_slack_repeat_is_a_reminder_not_a_new_storm() -> None:
    n = notification(2, sequence=3, new_count=0, kind="repeat")
    flat = "\n".join(all_texts(render_group_card(n)))
    assert "No new dead letters since 2027-01-15 08:01:15 UTC; 2 in all." in flat
    assert "Reminder #3" in flat


async def test_slack_digest_of_10000_hostile_members_stays_within_limits(aredis: aioredis.Redis) -> None:
    now = [T0]
    settings = SlackSinkSettings(name="team-slack", type="slack", url="http://127.0.0.1:9/x")
    grouper = Grouper(aredis, settings, lambda: now[0])
    queue = "q&<b>" + "@channel" * 50
    title = "<!channel> " + "&" * 200

    def hostile(i: int) -> Alert:
        alert = make_alert(
            queue=f"{i % 40}{queue}", job_id=f"{HOSTILE} `x` {i}", fingerprint="hostile",
            last_error=HOSTILE * 200, severity=Severity.CRITICAL if i == 9_999 else Severity.INFO,
        )
        summary = alert.summary.model_copy(update={"title": title[:120]})
        return alert.model_copy(update={"summary": summary})

    await grouper.add(hostile(0))
    for start in range(1, 10_000, 50):
        await asyncio.gather(*(grouper.add(hostile(i)) for i in range(start, min(start + 50, 10_000))))
    now[0] += 10
    [n] = await grouper.claim_due()
    assert n.count == 10_000 and len(n.jobs) == 10 and n.severity is Severity.CRITICAL
    card = render_group_card(n)
    assert_valid_card(card)
    assert_no_mentions(card)
    assert len(json.dumps(card["blocks"], ensure_ascii=False)) < 16_000
    assert sum(len(t) for t in all_texts(card)) <= 12_000
    flat = "\n".join(all_texts(card))
    assert "and 37 more queues" in flat and "10,000 jobs" in card["blocks"][0]["text"]["text"]
    assert card["blocks"][0]["text"]["text"].startswith("🚨")


def test_pagerduty_one_alert_per_group_keyed_by_the_first_job() -> None:
    sink = PagerDutySink("pd", SecretStr("R0UTING"), "http://127.0.0.1:9/pd", "dlq-bridge", httpx.AsyncClient())
    first = job_alert(0)
    one = sink.render_group(notification(40, first=first, severity=Severity.CRITICAL,
                                         queues={"orders": 30, "billing": 10}))
    two = sink.render_group(notification(45, sequence=2, new_count=5, first=first))
    assert one["dedup_key"] == two["dedup_key"] == "job-0" == sink.render(first)["dedup_key"]
    assert one["event_action"] == two["event_action"] == "trigger"
    payload = one["payload"]
    assert payload["severity"] == "critical"  # the group's routed severity
    summary = "ship_order failed on orders (40 jobs; ship_order ×40; queues orders ×30 · billing ×10)"
    assert payload["summary"] == summary
    details = payload["custom_details"]
    assert details["count"] == 40 and details["queues"] == {"orders": 30, "billing": 10}
    assert details["samples"] == [f"orders:job-{i}" for i in range(10)]
    assert details["fingerprint"] == "cause-a" and details["first_job"]["job_id"] == "job-0"
    assert two["payload"]["custom_details"]["count"] == 45
    assert two["payload"]["custom_details"]["change"] == "5 more since 2027-01-15 08:01:00 UTC, 45 in all."
    assert "routing_key" not in one


def test_pagerduty_group_keeps_its_limits() -> None:
    long_id = "j" * 400
    first = make_alert(job_id=long_id, fingerprint="f")
    event = render_pd(notification(3, first=first, queues={"q" * 3000: 3}))
    assert event["dedup_key"] == dedup_key(long_id) and len(event["dedup_key"]) <= 255
    assert len(event["payload"]["summary"]) <= 1024
    assert len(json.dumps(event)) < 512 * 1024


def render_pd(n: Notification) -> dict[str, Any]:
    return PagerDutySink("pd", SecretStr("k"), "http://127.0.0.1:9", "src", httpx.AsyncClient()).render_group(n)


async def test_webhook_alert_group_event_is_signed_like_the_single_event() -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = sinks(http, base)["webhook"]
        n = notification(12, sequence=2, new_count=4, queues={"orders": 12})
        await sink.send_group(n)
        await sink.send_group(n)  # a retry: same id, same body
    first, again = receiver.requests
    payload = Webhook(WHSEC).verify(first.body, first.headers)
    assert Webhook(OLD.encode()).verify(first.body, first.headers) == payload
    plain = "sha256=" + hmac.new(OLD.encode(), first.body, hashlib.sha256).hexdigest()
    assert plain in first.headers["x-signature"].split()
    assert payload["type"] == "dlq.alert_group" and payload["kind"] == "digest"
    assert first.headers["idempotency-key"] == n.ledger_key == f"group:fp:cause-a@{int(T0 * 1000)}:2"
    assert first.headers["webhook-id"] == payload["id"] == again.headers["webhook-id"]
    assert first.body == again.body
    assert [j["job_id"] for j in payload["jobs"]] == [f"job-{i}" for i in range(8, 12)]
    assert payload["jobs"][0]["queue"] == "orders" and payload["jobs"][0]["idempotency_key"] == "orders:job-8"
    assert (payload["count"], payload["new_count"], payload["sequence"]) == (12, 4, 2)
    assert payload["first_seen"] == "2027-01-15T08:00:00.000Z"
    assert payload["severity"] == "error" and payload["first"]["type"] == "dlq.alert"
    assert set(payload["summary"]) == {"title", "severity", "likely_cause", "next_steps", "runbook_hint", "repairs"}


async def test_slack_and_pagerduty_send_groups_to_real_receivers() -> None:
    receiver = Receiver(script=[Reply(429, headers={"Retry-After": "3"})])
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        made = sinks(http, base)
        n = notification(30)
        with pytest.raises(SinkRetryable) as caught:
            await made["slack"].send_group(n)
        assert caught.value.retry_after_s == 3 and caught.value.idempotency_key == n.ledger_key
        await made["slack"].send_group(n)
        await made["pagerduty"].send_group(n)
    _, slack_req, pd_req = receiver.requests
    assert slack_req.path == "slack" and json.loads(slack_req.body) == render_group_card(n)
    event = json.loads(pd_req.body)
    assert event["routing_key"] == "R0UTING" and event["payload"]["custom_details"]["count"] == 30


async def test_console_digest_card() -> None:
    stream = io.StringIO()
    sink = ConsoleSink("console", stream, color=False)
    await sink.send_group(notification(7, sequence=2, new_count=5, queues={"orders": 6, "b": 1}))
    card = stream.getvalue()
    assert "dlq-bridge digest #2" in card
    assert "5 more since 2027-01-15 08:01:00 UTC, 7 in all." in card
    assert "orders ×6 · b ×1" in card and card.count("│ sample") == 5


async def test_a_storm_through_grouper_and_real_receivers_pages_once_per_cause(aredis: aioredis.Redis) -> None:
    now = [T0]
    receiver = Receiver(default=Reply(202))
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        made = sinks(http, base)
        groupers = {
            "slack": Grouper(aredis, SlackSinkSettings(name="team-slack", type="slack", url=f"{base}/s"),
                             lambda: now[0]),
            "pagerduty": Grouper(aredis, PagerDutySinkSettings(name="pd", type="pagerduty", routing_key="k",
                                                               group_by="fingerprint"), lambda: now[0]),
        }

        async def tick(seconds: float) -> None:
            now[0] += seconds
            for name, grouper in groupers.items():
                for n in await grouper.claim_due():
                    await made[name].send_group(n)
                    await grouper.notified(n, delivered=True)

        for i in range(300):
            for grouper in groupers.values():
                await grouper.add(job_alert(i, fp="cause-a" if i % 2 else "cause-b"))
        await tick(10)
        for i in range(300, 310):
            await groupers["pagerduty"].add(job_alert(i, fp="cause-a"))
            await groupers["slack"].add(job_alert(i, fp="cause-a"))
        await tick(30)
        await tick(30)
    slack = [json.loads(r.body) for r in receiver.requests if r.path == "slack"]
    pd = [json.loads(r.body) for r in receiver.requests if r.path == "pd"]
    assert len(slack) == 3 and len(pd) == 3
    assert len({e["dedup_key"] for e in pd}) == 2  # one PagerDuty alert per cause
    assert [e["payload"]["custom_details"]["count"] for e in pd][-1] == 160
    assert "10 more since 2027-01-15 08:00:10 UTC, 160 in all." in json.dumps(slack[-1], ensure_ascii=False)


async def test_an_outage_card_names_cause_dependency_jobs_and_queues_on_every_sink(aredis: aioredis.Redis) -> None:
    """12 queues, one cause: the title says what is down and how wide, never a hash or one queue."""
    from bridge.sinks.alertmanager import render_group_alert
    from bridge.sinks.console import render_group_card as console_card
    from bridge.sinks.email.message import group_message
    from bridge.sinks.pagerduty import render_group_event
    from bridge.sinks.teams_card import render_group_card as teams_card
    from bridge.sinks.webhook import render_group_body
    from tests.test_grouping import Clock, outage_job

    clock = Clock(T0)
    grouper = Grouper(aredis, SlackSinkSettings(name="s", type="slack", url="http://127.0.0.1:9/h", group_by="cause"),
                      clock)
    for i in range(12):
        for n in range(3 if i else 250):
            await grouper.add(outage_job(n, f"queue-{i:02d}", name="reindex" if n == 1 else "sync_inventory"))
    clock.advance(10)
    [n] = await grouper.claim_due()
    title = "postgres-primary:5432 unreachable — 12 queues, 283 jobs"
    card = render_group_card(n)
    assert_valid_card(card)
    flat = "\n".join(all_texts(card))
    assert card["blocks"][0]["text"]["text"].endswith(title), "the count is said once"
    assert "sync_inventory ×271 · reindex ×12" in flat
    assert "cause: postgres-primary:5432 unreachable" in flat and "postgres-primary:5432" in flat
    assert "queue-00 ×250" in flat and "and 2 more queues" in flat
    assert "queue-00 ×250, 08:00:00–08:00:00 UTC" in flat  # each queue's first and last arrival
    assert n.first.dead_letter.fingerprint not in flat  # the label is words, not a hash
    event = render_group_event(n, "bridge")
    assert event["payload"]["summary"].startswith(title + " (283 jobs; sync_inventory ×271 · reindex ×12;")
    assert event["payload"]["custom_details"]["cause"]["dependency"] == "postgres-primary:5432"
    assert len(event["payload"]["custom_details"]["queue_spans"]) == 12
    body = render_group_body(n)
    assert body["title"] == title and body["job_names"] == {"sync_inventory": 271, "reindex": 12}
    assert body["cause"]["outage"] is True and body["label"] == "cause: postgres-primary:5432 unreachable"
    text = console_card(n)
    assert title in text and "dependency postgres-primary:5432" in text and "queue-00 ×250, 08:00:00" in text
    teams = json.dumps(teams_card(n), ensure_ascii=False)
    mail = group_message(n, "bridge@example.com", ["oncall@example.com"])
    mail_text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    am = render_group_alert(n)["annotations"]
    for name, words in (("Teams", teams), ("email", mail_text), ("Alertmanager", json.dumps(am, ensure_ascii=False))):
        assert title in words, f"{name}: the outage title"
        assert "cause: postgres-primary:5432 unreachable" in words, f"{name}: the group in words"
        assert "sync_inventory ×271 · reindex ×12" in words, f"{name}: the job names with counts"
        assert "queue-00 ×250" in words and "and 2 more queues" in words, f"{name}: the queues, cut"
        assert "list ×283" in words and "postgres-primary:5432" in words, f"{name}: kinds and dependency"
        assert n.first.dead_letter.fingerprint not in words, f"{name}: words, not a hash"
    assert str(mail["Subject"]).startswith(f"[ERROR] {title} · queues queue-00 ×250")
    assert "queue-00 ×250, 08:00:00–08:00:00 UTC" in teams and "queue-00 ×250, 08:00:00–08:00:00 UTC" in mail_text
    assert am["summary"].startswith(title) and am["dependency"] == "postgres-primary:5432"
    modelled = n.first.summary.model_copy(update={"title": "Inventory sync cannot reach its database",
                                                  "source": SummarySource.OPENCLAW, "fallback_reason": None})
    by_model = n.model_copy(update={"first": n.first.model_copy(update={"summary": modelled})})
    assert render_group_card(by_model)["blocks"][0]["text"]["text"] == card["blocks"][0]["text"]["text"], (
        "the outage title is the cause's: a model's summary and the fallback's give the same one")
