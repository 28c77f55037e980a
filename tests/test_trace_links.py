"""A job's trace where people click: every sink's body, a group's bounded listing, the console page.

The link is `[tracing] trace_url` with the validated trace id; without it the id is shown as text.
A stored link that is not an http(s) URL holding the job's own trace id is never shown.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from bridge.config.tracing import TracingSettings
from bridge.console.entries import envelope_view
from bridge.console.pages import pages_router
from bridge.console.views import EntryView
from bridge.core.models import Alert, GroupJob, Notification
from bridge.sinks import alertmanager, cloudevents, pagerduty, slack, teams_card, trace_links, webhook
from bridge.sinks.email import message
from tests import test_trace_carriers as carriers_test
from tests.console.test_pages import HostileService, hostile_entry
from tests.support.receiver import make_alert

TRACING = TracingSettings(trace_url="https://tempo.example/explore?traceId={trace_id}")
T0 = 1_700_000_000.0
HOSTILE_CARRIED = [
    f"00-{'ab' * 16}-00f067aa0ba902b7-01" + "0" * 300,  # too long
    f"ff-{'ab' * 16}-00f067aa0ba902b7-01",  # wrong version
    f"00-{'ab' * 14}zzzz-00f067aa0ba902b7-01",  # non-hex
    f"00-{'ab' * 16}-00f067aa0ba902b7-01\r\nX-Injected: yes",  # CR/LF
    f"https://evil.example/?t=00-{'ab' * 16}",  # a URL
]


def trace_id(i: int) -> str:
    return f"{i + 1:032x}"


def traced(i: int = 0, *, linked: bool = True, **fields: Any) -> Alert:
    tid = trace_id(i)
    url = TRACING.trace_link(tid) if linked else None
    alert = make_alert(job_id=f"job-{i}", traceparent=f"00-{tid}-00f067aa0ba902b7-03", **fields)
    return alert.model_copy(update={"trace_url": url})


def link_of(i: int) -> str:
    return f"https://tempo.example/explore?traceId={trace_id(i)}"


def group(count: int, *, linked: bool = True) -> Notification:
    jobs = [GroupJob.of(traced(i, linked=linked), T0 + i) for i in range(count)]
    return Notification(
        sink="s",
        group_key="fp:x",
        kind="digest",
        sequence=1,
        count=count,
        new_count=count,
        previous_at=None,
        first_seen=T0,
        last_seen=T0 + 60,
        queues=["orders"],
        queue_counts={"orders": count},
        sample_job_ids=[j.job_id for j in jobs[:10]],
        severity=traced().severity,
        first=traced(0, linked=linked),
        jobs=jobs,
        opened_at=T0,
        claim="t",
    )


def test_webhook_body_carries_traceparent_trace_id_and_link() -> None:
    body = webhook.render_body(traced(0))
    assert body["traceparent"] == f"00-{trace_id(0)}-00f067aa0ba902b7-03"
    assert (body["trace_id"], body["trace_url"]) == (trace_id(0), link_of(0))
    plain = webhook.render_body(make_alert())
    assert plain["traceparent"] is plain["trace_id"] is plain["trace_url"] is None


def test_without_trace_url_the_id_is_text_and_no_link_anywhere() -> None:
    alert = traced(0, linked=False)
    assert webhook.render_body(alert)["trace_url"] is None
    assert f"`{trace_id(0)}`" in json.dumps(slack.render_card(alert))
    assert "View trace" not in json.dumps(slack.render_card(alert))
    event = pagerduty.render_event(alert, "bridge")
    assert "links" not in event and event["payload"]["custom_details"]["trace_id"] == trace_id(0)
    assert alertmanager.annotations_of(alert)["trace_id"] == trace_id(0)
    assert "trace_url" not in alertmanager.annotations_of(alert)
    assert f"trace {trace_id(0)}" in message.alert_message(alert, "b@x.example", ["o@x.example"]).as_string()
    assert trace_id(0) in json.dumps(teams_card.render_card(alert))


@pytest.mark.parametrize(
    "stored",
    ["javascript:alert(1)//" + trace_id(0), "https://evil.example/", f"https://x.example/{trace_id(0)}\n<b>"],
)
def test_a_stored_link_that_is_not_the_jobs_own_is_never_shown(stored: str) -> None:
    alert = traced(0).model_copy(update={"trace_url": stored})
    assert webhook.render_body(alert)["trace_url"] is None
    assert stored not in json.dumps(slack.render_card(alert)) and "View trace" not in json.dumps(
        slack.render_card(alert)
    )


def test_slack_card_has_a_view_trace_link() -> None:
    assert f"<{link_of(0)}|View trace>" in json.dumps(slack.render_card(traced(0)))


def test_pagerduty_links_the_trace_beside_the_runbook() -> None:
    event = pagerduty.render_event(traced(0, runbook_url="https://runbooks.example/x.md"), "bridge")
    assert event["links"] == [
        {"href": "https://runbooks.example/x.md", "text": "Runbook"},
        {"href": link_of(0), "text": "View trace"},
    ]
    assert event["payload"]["custom_details"]["trace_url"] == link_of(0)


def test_teams_card_has_a_view_trace_action() -> None:
    content = teams_card.render_card(traced(0))["attachments"][0]["content"]
    assert {"type": "Action.OpenUrl", "title": "View trace", "url": link_of(0)} in content["actions"]


def test_email_links_the_trace_in_text_and_html() -> None:
    mail = message.alert_message(traced(0), "b@x.example", ["o@x.example"])
    text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert f"View trace: {link_of(0)}" in text
    assert f'<a href="{link_of(0)}">View trace</a>' in html.replace("&amp;", "&")


def test_alertmanager_annotations_carry_trace_url_and_id() -> None:
    annotations = alertmanager.annotations_of(traced(0))
    assert (annotations["trace_id"], annotations["trace_url"]) == (trace_id(0), link_of(0))


@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_cloudevents_carry_the_distributed_tracing_extension(mode: cloudevents.Mode) -> None:
    alert = traced(0)
    event = cloudevents.alert_event(alert, webhook.render_body(alert), "dlq-bridge/r1")
    body, headers = cloudevents.frame(event, mode)
    expected = f"00-{trace_id(0)}-00f067aa0ba902b7-03"
    if mode == "structured":
        assert json.loads(body)["traceparent"] == expected
    else:
        assert headers["ce-traceparent"] == expected
    plain = make_alert()
    assert "traceparent" not in cloudevents.alert_event(plain, webhook.render_body(plain), "s").attributes


def test_a_group_lists_each_jobs_trace_bounded_and_says_whose_its_own_link_is() -> None:
    n = group(25)
    listed = trace_links.listed(n)
    assert [job for job, _ in listed] == [f"job-{i}" for i in range(trace_links.LISTED_MAX)]
    card = json.dumps(slack.render_group_card(n))
    assert "the trace of job job-0, the group" in card
    assert f"<{link_of(9)}|View trace>" in card and link_of(10) not in card
    event = pagerduty.render_group_event(n, "bridge")
    texts = [link["text"] for link in event["links"]]
    assert texts[0] == "View trace (the trace of job job-0, the group's first)"
    assert texts[1:] == [f"Trace of job job-{i}" for i in range(1, 10)]
    assert alertmanager.render_group_alert(n)["annotations"]["trace_of"].startswith("the trace of job job-0")
    assert link_of(9) in alertmanager.render_group_alert(n)["annotations"]["job_traces"]
    assert link_of(9) in json.dumps(teams_card.render_group_card(n))
    mail = message.group_message(n, "b@x.example", ["o@x.example"]).as_string()
    assert "job job-9" in mail and "job job-10:" not in mail


def test_a_webhook_group_event_lists_every_jobs_trace_and_names_its_own() -> None:
    body = webhook.render_group_body(group(25))
    assert (body["trace_job_id"], body["trace_url"]) == ("job-0", link_of(0))
    assert [job["trace_url"] for job in body["jobs"]] == [link_of(i) for i in range(25)]


def _page_client(entry: EntryView, trace_link: Any) -> httpx.AsyncClient:
    class Service(HostileService):
        async def entry(self, source: str, entry_id: str) -> EntryView | None:
            return entry

        async def history(self, source: str, entry_id: str) -> list[Any]:
            return []

    app = FastAPI()
    app.include_router(pages_router(lambda: Service(), None, trace_link=trace_link))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test")


async def test_the_console_entry_page_links_the_trace() -> None:
    letter = traced(0).dead_letter
    entry = hostile_entry(None).model_copy(update={"envelope": envelope_view(letter)})
    async with _page_client(entry, TRACING.trace_link) as client:
        html = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
    assert f'<a href="{link_of(0)}" rel="noopener noreferrer">View trace</a>' in html.replace("&amp;", "&")
    async with _page_client(entry, None) as client:
        html = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
    assert "View trace" not in html and trace_id(0) in html


def test_the_console_envelope_drops_a_stored_traceparent_that_breaks_the_rules() -> None:
    letter = make_alert(traceparent="https://evil.example/" + trace_id(0)).dead_letter
    view = envelope_view(letter)
    assert view.traceparent is None and view.trace_id is None


def _release_0_2_0_models() -> Any:
    """bridge/core/models.py of release 0.2.0 (commit 72a1f3f), loaded from git history."""
    import subprocess
    import sys
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shown = subprocess.run(
        ["git", "show", "72a1f3f:bridge/core/models.py"], cwd=root, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        pytest.skip("release 0.2.0 (commit 72a1f3f) is not in this checkout's history")
    module = types.ModuleType("models_0_2_0")
    sys.modules[module.__name__] = module
    try:
        exec(compile(shown.stdout, "models_0_2_0.py", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


def test_release_0_2_0_reads_an_alert_and_group_job_carrying_trace_context() -> None:
    old = _release_0_2_0_models()
    alert = traced(0)
    read = old.Alert.model_validate_json(alert.model_dump_json())
    assert read.dead_letter.job_id == "job-0" and read.runbook_url == alert.runbook_url
    job = old.GroupJob.model_validate_json(GroupJob.of(alert, T0).model_dump_json())
    assert job.job_id == "job-0"


def test_an_alert_written_by_release_0_2_0_reads_without_trace_context() -> None:
    old = _release_0_2_0_models()
    written = old.Alert.model_validate_json(make_alert().model_dump_json(exclude={"trace_url"})).model_dump_json()
    alert = Alert.model_validate_json(written)
    assert alert.trace_url is None and alert.trace_link is None and webhook.render_body(alert)["trace_id"] is None


def _every_sink_text(alert: Alert) -> str:
    n = group(1).model_copy(update={"first": alert, "jobs": [GroupJob.of(alert, T0)], "kind": "digest", "count": 2})
    event = cloudevents.alert_event(alert, webhook.render_body(alert), "s")
    parts: list[Any] = [
        webhook.render_body(alert),
        webhook.render_group_body(n),
        cloudevents.binary(event)[1],
        slack.render_card(alert),
        slack.render_group_card(n),
        pagerduty.render_event(alert, "s"),
        pagerduty.render_group_event(n, "s"),
        teams_card.render_card(alert),
        teams_card.render_group_card(n),
        alertmanager.render_alert(alert),
        alertmanager.render_group_alert(n),
    ]
    mails = [message.alert_message(alert, "b@x.example", ["o@x.example"]).as_string()]
    mails.append(message.group_message(n, "b@x.example", ["o@x.example"]).as_string())
    return json.dumps(parts, ensure_ascii=False) + "".join(mails)


@pytest.mark.parametrize("kind", ["sidekiq", "celery", "bullmq", "rq", "dramatiq"])
@pytest.mark.parametrize("hostile", HOSTILE_CARRIED)
def test_a_hostile_traceparent_in_any_carrier_reaches_no_sink(kind: str, hostile: str) -> None:
    letter = carriers_test._letter(carriers_test.CARRIERS[kind](hostile))
    trace = letter.trace
    alert = make_alert(job_id=letter.job_id).model_copy(
        update={
            "dead_letter": letter,
            "trace_url": TRACING.trace_link(trace.trace_id) if trace else None,
        }
    )
    text = _every_sink_text(alert)
    for piece in ("evil.example", "X-Injected", "zzzz", "0" * 300, "ff-"):
        assert piece not in text
    assert "View trace" not in text
