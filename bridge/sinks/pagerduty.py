"""PagerDuty sink: Events API v2 `trigger` events, and `resolve` events for retried jobs.

`dedup_key` is the job id (its `sha256:<hex>` when longer than 255 chars), so
every retry and every replay after a crash updates the same incident, and a
`resolve` (`bridge.delivery.resolve`) closes it with the same key. 202 is
success, 400 permanent, 429/5xx retried (mapping in `http_errors`). The
routing key is a secret: `render()` leaves it out, only `send()` adds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator

from bridge.config.secrets import RequiredSecret, secret_env, secret_file
from bridge.config.section import check_http_url
from bridge.core.models import Alert, Notification
from bridge.core.resolves import INCIDENT_KEY_CHARS, Resolve, incident_key
from bridge.sinks import digest, trace_links
from bridge.sinks.http_errors import post
from bridge.sinks.sink_plugin import Pace, SinkContext, SinkPlugin
from bridge.sinks.sink_settings import GroupBy, SinkSettingsBase

SUMMARY_CHARS = 1024
DEDUP_CHARS = INCIDENT_KEY_CHARS
ERROR_CHARS = 8000
FIELD_CHARS = 2000


def dedup_key(job_id: str) -> str:
    """The job id, or `sha256:<hex>` of it when it is too long for PagerDuty (`incident_key`)."""
    return incident_key(job_id)


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def summary_line(alert: Alert) -> str:
    prefix = "[TEST] " if alert.is_test else ""
    dl = alert.dead_letter
    line = f"{prefix}{alert.summary.title} (queue {dl.queue}, job {dl.job_id})"
    return _cut(line, SUMMARY_CHARS) or ""


def custom_details(alert: Alert) -> dict[str, Any]:
    dl, summary = alert.dead_letter, alert.summary
    return {
        "test": alert.is_test,
        "idempotency_key": _cut(alert.idempotency_key, FIELD_CHARS),
        "queue": dl.queue,
        "job_id": _cut(dl.job_id, FIELD_CHARS),
        "job_name": _cut(dl.job_name, FIELD_CHARS),
        "attempts": dl.attempts,
        "correlation_id": _cut(dl.correlation_id, FIELD_CHARS),
        "first_failed_at": _cut(dl.first_failed_at, FIELD_CHARS),
        "last_error": _cut(dl.last_error, ERROR_CHARS),
        "payload_excerpt": _cut(dl.payload_excerpt, ERROR_CHARS),
        "parse_error": dl.parse_error,
        "source_key": dl.source_key,
        "likely_cause": summary.likely_cause,
        "next_steps": list(summary.next_steps),
        "runbook_hint": summary.runbook_hint,
        "summary_source": summary.source.value,
        "fallback_reason": summary.fallback_reason,
        "assessed_severity": summary.severity.value,
        **{name: value for name, value in trace_links.fields(alert).items() if name != "traceparent"},
        "seen_before": alert.seen_before.line() if alert.seen_before is not None else None,
    }


def render_event(alert: Alert, source: str) -> dict[str, Any]:
    """The event without its routing key."""
    dl = alert.dead_letter
    event: dict[str, Any] = {
        "event_action": "trigger",
        "dedup_key": dedup_key(dl.job_id),
        "client": "dlq-bridge",
        "payload": {
            "summary": summary_line(alert),
            "source": source,
            "severity": alert.severity.value,
            "component": dl.queue,
            "class": _cut(dl.job_name or _error_class(dl.last_error) or "dead_letter", 255),
            "custom_details": custom_details(alert),
        },
    }
    links = [{"href": alert.runbook_url, "text": "Runbook"}] if alert.runbook_url else []
    trace = alert.trace_link
    if trace is not None and trace.url:
        links.append({"href": trace.url, "text": "View trace"})
    if links:
        event["links"] = links
    return event


def _group_links(n: Notification, event: dict[str, Any]) -> list[dict[str, str]]:
    """The first job's links (its trace named as the group's first job's), then each listed job's trace."""
    links: list[dict[str, str]] = list(event.get("links", []))
    note = trace_links.own_note(n)
    for link in links:
        if link["text"] == "View trace" and note:
            link["text"] = f"View trace ({note})"
    first_id = n.first.dead_letter.job_id
    for job_id, trace in trace_links.listed(n):
        if trace.url and job_id != first_id:
            links.append({"href": trace.url, "text": _cut(f"Trace of job {job_id}", 200) or ""})
    return links


def _error_class(error: str | None) -> str | None:
    """`TimeoutError` from `TimeoutError: warehouse API timed out`."""
    if not error:
        return None
    head = error.split(":", 1)[0].strip()
    return head if head and len(head) <= 100 and " " not in head else None


def render_resolve(resolve: Resolve) -> dict[str, Any]:
    """The resolve event without its routing key: the trigger's dedup_key, nothing else needed."""
    return {"event_action": "resolve", "dedup_key": resolve.dedup_key, "client": "dlq-bridge"}


SAMPLES = 10


def group_summary(n: Notification) -> str:
    """`[TEST] <headline> (12 jobs; sync_inventory ×10 · reindex ×2; queues orders ×10 · …)`.

    A cause group's incident is named after its cause and dependency, never after one queue.
    """
    prefix = "[TEST] " if n.first.is_test else ""
    head = digest.headline(n)
    if n.by_cause and not n.outage:
        head = digest.cause(n).label
    shape = f"{digest.jobs_word(n.count)}; {digest.jobs_line(n, 3)}; queues {digest.queues_line(n, 3)}"
    return _cut(f"{prefix}{head} ({shape})", SUMMARY_CHARS) or ""


def group_details(n: Notification) -> dict[str, Any]:
    """What on-call reads in the incident: the group's size and shape, then the first job."""
    return {
        "count": n.count,
        "new_count": n.new_count,
        "change": digest.change_line(n),
        "group": _cut(digest.group_label(n), FIELD_CHARS),
        "cause": digest.cause_facts(n),
        "job_names": {(name or "(unnamed)")[:200]: c for name, c in sorted(n.job_counts.items())[:50]},
        "kinds": dict(sorted(n.kind_counts.items())[:20]),
        "queues": {q[:200]: n.queue_counts.get(q, 0) for q in n.queues[:50]},
        "queue_spans": digest.queue_spans(n, 20),
        "samples": [_cut(f"{j.queue}:{j.job_id}", 300) for j in n.jobs[:SAMPLES]],
        "fingerprint": n.first.dead_letter.fingerprint,
        "group_key": _cut(n.group_key, FIELD_CHARS),
        "notification": f"{n.kind} #{n.sequence}",
        "first_seen": digest.iso(n.first_seen),
        "last_seen": digest.iso(n.last_seen),
        "previous_notification_at": digest.iso(n.previous_at),
        "first_job": custom_details(n.first),
        "trace_of": trace_links.own_note(n),
        "traces": {_cut(job_id, 200): trace.url or trace.trace_id for job_id, trace in trace_links.listed(n)},
    }


def render_group_event(n: Notification, source: str) -> dict[str, Any]:
    """One alert per group: `dedup_key` = the first job's, so every re-trigger merges into it.

    A group of one is exactly the job's own event. A cause group's `component` is its dependency
    (else its label) and its `class` its error class, the same whichever job came first.
    """
    event = render_event(n.first, source)
    if n.is_single:
        return event
    payload = event["payload"]
    payload["summary"] = group_summary(n)
    payload["severity"] = n.severity.value
    payload["custom_details"] = group_details(n)
    links = _group_links(n, event)
    if links:
        event["links"] = links
    if n.by_cause:  # any queue's job can come first: name the cause, not its job
        cause = digest.cause(n)
        payload["component"] = _cut(cause.dependency or cause.label, 255)
        payload["class"] = _cut(cause.error_class or "dead_letter", 255)
    return event


class PagerDutySink:
    """One trigger event per attempt to the configured Events API URL."""

    type = "pagerduty"

    def __init__(
        self,
        name: str,
        routing_key: SecretStr,
        events_url: str,
        source: str,
        http: httpx.AsyncClient,
        timeout_s: float = 10.0,
    ) -> None:
        self.name = name
        self._key = routing_key
        self._url = events_url
        self._source = source
        self._http = http
        self._timeout_s = timeout_s

    def render(self, alert: Alert) -> dict[str, Any]:
        return render_event(alert, self._source)

    async def send(self, alert: Alert) -> None:
        key = self._key.get_secret_value()
        event = {"routing_key": key, **self.render(alert)}
        await post(
            self._http, self.name, alert.idempotency_key, self._url,
            content=json.dumps(event, ensure_ascii=False).encode(),
            headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[key],
        )

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return render_group_event(notification, self._source)

    async def send_group(self, notification: Notification) -> None:
        key = self._key.get_secret_value()
        event = {"routing_key": key, **self.render_group(notification)}
        await post(
            self._http, self.name, notification.ledger_key, self._url,
            content=json.dumps(event, ensure_ascii=False).encode(),
            headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[key],
        )

    def group_dedup_key(self, first: Alert) -> str:
        return dedup_key(first.dead_letter.job_id)

    async def send_resolve(self, resolve: Resolve) -> None:
        """One attempt at `event_action: resolve` (same errors as `send`)."""
        key = self._key.get_secret_value()
        event = {"routing_key": key, **render_resolve(resolve)}
        await post(
            self._http, self.name, resolve.ledger_key_part, self._url,
            content=json.dumps(event, ensure_ascii=False).encode(),
            headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[key],
        )


class PagerDutySinkSettings(SinkSettingsBase):
    type: Literal["pagerduty"] = Field(description="Sink type.")
    routing_key: RequiredSecret = Field(
        default=None,
        description="PagerDuty routing key inline (prefer `routing_key_env` or `routing_key_file`).",
    )
    routing_key_env: str | None = secret_env("the routing key")
    routing_key_file: Path | None = secret_file("the routing key")
    events_url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", description="PagerDuty Events API v2 URL."
    )
    events_per_minute: float = Field(default=120.0, gt=0, description="Pacing per routing key.")
    source: str | None = Field(default=None, description="PagerDuty `payload.source` (default: the consumer id).")
    group_by: GroupBy = Field(
        default="cause",
        description=(
            "How alerts are grouped: `cause` (one incident per outage across queues and kinds, split by "
            "routed severity), `fingerprint`, `queue` or `none`"
        ),
    )
    resolve_on_retry: bool = Field(
        default=True,
        description=(
            "Send `event_action: resolve` with the trigger's dedup_key when an alerted job is retried or "
            "deleted by hand: it left a Sidekiq dead set, BullMQ failed set, RQ failed registry or Dramatiq "
            "dead-letter queue without being trimmed (docs/sources.md), or it was redriven (`dlq-bridge "
            "redrive` or the console). On a grouped sink the group's incident is resolved once every job of "
            "the group has left"
        ),
    )

    @field_validator("events_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "events_url")

    def pace(self) -> Pace:
        assert self.routing_key is not None
        return Pace(self.routing_key.get_secret_value(), self.events_per_minute / 60.0)


def _build(settings: PagerDutySinkSettings, ctx: SinkContext) -> PagerDutySink:
    assert settings.routing_key is not None
    source = settings.source or ctx.consumer_id
    return PagerDutySink(settings.name, settings.routing_key, settings.events_url, source, ctx.http, ctx.timeout_s)


PLUGIN = SinkPlugin(
    settings=PagerDutySinkSettings,
    build=_build,
    pace=PagerDutySinkSettings.pace,
    resolves=lambda s: s.resolve_on_retry,
    probe_url=lambda s: s.events_url,
)
