"""Webhook sink: one flat, signed JSON object per alert (docs/design.md, section 5).

Headers: `Idempotency-Key: <queue>:<job_id>`, `X-Signature: sha256=<hex>`,
and Standard Webhooks `webhook-id` / `webhook-timestamp` / `webhook-signature`.
With `format = "cloudevents"` the same body is the `data` of a CloudEvent
(`bridge.sinks.cloudevents`), signed the same way over the bytes sent.
The body and `webhook-id` are the same on every retry and every replay of one
entry; only the timestamp and its signature are computed per attempt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, model_validator

from bridge.config.secrets import RequiredSecret, RequiredSecretText, secret_env, secret_file
from bridge.config.section import check_http_url
from bridge.core.models import Alert, Notification, Summary
from bridge.sinks import cloudevents, digest, trace_links
from bridge.sinks.http_errors import post
from bridge.sinks.signing import header_key, message_id, sign_headers
from bridge.sinks.sink_plugin import SinkContext, SinkPlugin
from bridge.sinks.sink_settings import SinkSettingsBase

EVENT_TYPE = "dlq.alert"
GROUP_EVENT_TYPE = "dlq.alert_group"


@dataclass(frozen=True)
class CloudFraming:
    """`format = "cloudevents"`: the event's `source` and the HTTP binding mode."""

    source: str
    mode: cloudevents.Mode = "structured"


def render_body(alert: Alert) -> dict[str, Any]:
    dl, summary = alert.dead_letter, alert.summary
    return {
        "type": EVENT_TYPE,
        "id": message_id(alert.idempotency_key, dl.raw_digest),
        "idempotency_key": alert.idempotency_key,
        "test": alert.is_test,
        "severity": alert.severity.value,
        "queue": dl.queue,
        "reported_queue": dl.reported_queue,
        "job_id": dl.job_id,
        "job_name": dl.job_name,
        "attempts": dl.attempts,
        "correlation_id": dl.correlation_id,
        "last_error": dl.last_error,
        "first_failed_at": dl.first_failed_at,
        "payload_excerpt": dl.payload_excerpt,
        "source_key": dl.source_key,
        "raw_digest": dl.raw_digest,
        "parse_error": dl.parse_error,
        "summary": summary_body(summary),
        "summary_source": summary.source.value,
        "fallback_reason": summary.fallback_reason,
        "runbook_url": alert.runbook_url,
        **trace_links.fields(alert),
        "seen_before": seen_before_body(alert),
    }


def seen_before_body(alert: Alert) -> dict[str, Any] | None:
    """The cause's history (bridge.core.seen_before) and its sentence; null when first seen."""
    seen = alert.seen_before
    return None if seen is None else {**seen.model_dump(mode="json"), "line": seen.line()}


def summary_body(summary: Summary) -> dict[str, Any]:
    """The five summary keys and `repairs`: the reply fields the bridge repaired (docs/design.md, section 4)."""
    return {**summary.draft().model_dump(mode="json"), "repairs": list(summary.repairs)}


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def group_message_id(n: Notification) -> str:
    """The same id for every retry of one notification: ledger key + the first job's digest."""
    if n.is_single:
        return message_id(n.first.idempotency_key, n.first.dead_letter.raw_digest)
    return message_id(n.ledger_key, n.first.dead_letter.raw_digest)


def render_group_body(n: Notification) -> dict[str, Any]:
    """`dlq.alert_group`: the group, its first job's summary, and the jobs new since the last event.

    Across a group's events each job is listed exactly once (a repeat lists
    none); beyond 500 new jobs the rest follow at once in the next events
    (`pending` says how many). A group of one is exactly the job's own `dlq.alert` body.
    """
    if n.is_single:
        return render_body(n.first)
    first, summary = n.first, n.first.summary
    return {
        "type": GROUP_EVENT_TYPE,
        "id": group_message_id(n),
        "idempotency_key": n.ledger_key,
        "test": first.is_test,
        "group_key": n.group_key,
        "kind": n.kind,
        "sequence": n.sequence,
        "severity": n.severity.value,
        "count": n.count,
        "new_count": n.new_count,
        "pending": n.pending,
        "first_seen": digest.iso(n.first_seen),
        "last_seen": digest.iso(n.last_seen),
        "previous_at": digest.iso(n.previous_at),
        "queues": {q: n.queue_counts.get(q, 0) for q in n.queues},
        "label": digest.group_label(n),
        "title": digest.headline(n),
        "job_names": n.job_counts,
        "kinds": n.kind_counts,
        "queue_first_seen": {q: digest.iso(t) for q, t in n.queue_first.items()},
        "queue_last_seen": {q: digest.iso(t) for q, t in n.queue_last.items()},
        "cause": digest.cause_facts(n) if n.by_cause else None,
        "fingerprint": first.dead_letter.fingerprint,
        "summary": summary_body(summary),
        "summary_source": summary.source.value,
        "fallback_reason": summary.fallback_reason,
        "runbook_url": first.runbook_url,
        **trace_links.group_fields(n),
        "first": render_body(first),
        "jobs": [{**job.model_dump(mode="json"), **trace_links.job_fields(job)} for job in n.jobs],
    }


class WebhookSink:
    """POSTs the signed body to one internal URL (as a CloudEvent when `cloud` is given)."""

    type = "webhook"

    def __init__(
        self,
        name: str,
        url: str,
        secrets: Sequence[str],
        http: httpx.AsyncClient,
        timeout_s: float = 10.0,
        cloud: CloudFraming | None = None,
    ) -> None:
        self.name = name
        self._url = url
        self._secrets = list(secrets)
        self._http = http
        self._timeout_s = timeout_s
        self._cloud = cloud

    def render(self, alert: Alert) -> dict[str, Any]:
        return render_body(alert)

    def alert_bytes(self, alert: Alert) -> tuple[bytes, dict[str, str]]:
        """The exact body and its content headers."""
        body = self.render(alert)
        if self._cloud is None:
            return encode(body), {"Content-Type": "application/json"}
        return cloudevents.frame(cloudevents.alert_event(alert, body, self._cloud.source), self._cloud.mode)

    def request_headers(self, alert: Alert, body: bytes, content: dict[str, str]) -> dict[str, str]:
        msg_id = message_id(alert.idempotency_key, alert.dead_letter.raw_digest)
        return {
            **content,
            "Idempotency-Key": header_key(alert.idempotency_key),
            **sign_headers(self._secrets, msg_id, body),
        }

    async def send(self, alert: Alert) -> None:
        body, content = self.alert_bytes(alert)
        await post(
            self._http, self.name, alert.idempotency_key, self._url,
            content=body, headers=self.request_headers(alert, body, content),
            timeout_s=self._timeout_s, secrets=self._secrets,
        )

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return render_group_body(notification)

    def group_bytes(self, notification: Notification) -> tuple[bytes, dict[str, str]]:
        body = self.render_group(notification)
        if self._cloud is None:
            return encode(body), {"Content-Type": "application/json"}
        event = cloudevents.group_event(notification, body, self._cloud.source)
        return cloudevents.frame(event, self._cloud.mode)

    def group_headers(self, notification: Notification, body: bytes, content: dict[str, str]) -> dict[str, str]:
        return {
            **content,
            "Idempotency-Key": header_key(notification.ledger_key),
            **sign_headers(self._secrets, group_message_id(notification), body),
        }

    async def send_group(self, notification: Notification) -> None:
        body, content = self.group_bytes(notification)
        await post(
            self._http, self.name, notification.ledger_key, self._url,
            content=body, headers=self.group_headers(notification, body, content),
            timeout_s=self._timeout_s, secrets=self._secrets,
        )


class WebhookSinkSettings(SinkSettingsBase):
    type: Literal["webhook"] = Field(description="Sink type.")
    url: RequiredSecretText = Field(default=None, description="Endpoint URL.")
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    secret: RequiredSecret = Field(
        default=None, description="Signing secret(s) inline, space or comma separated for rotation."
    )
    secret_env: str | None = secret_env("the signing secret(s)")
    secret_file: Path | None = secret_file("the signing secret(s)")
    format: Literal["json", "cloudevents"] = Field(
        default="json", description="`json`: our flat body; `cloudevents`: the same body as a CloudEvents 1.0 event"
    )
    cloudevents_mode: cloudevents.Mode = Field(
        default="structured",
        description="CloudEvents binding: `structured` (application/cloudevents+json) or `binary` (ce-* headers)",
    )

    @model_validator(mode="after")
    def _url_shape(self) -> WebhookSinkSettings:
        if self.url is not None:
            check_http_url(self.url, f"sink {self.name}: url")
        return self

    def signing_secrets(self) -> list[str]:
        """Several secrets (space or comma separated) sign in parallel, for rotation."""
        assert self.secret is not None
        return [s for s in re.split(r"[\s,]+", self.secret.get_secret_value()) if s]


def _build(settings: WebhookSinkSettings, ctx: SinkContext) -> WebhookSink:
    assert settings.url is not None
    cloud = None
    if settings.format == "cloudevents":
        cloud = CloudFraming(cloudevents.source_of(ctx.consumer_id), settings.cloudevents_mode)
    return WebhookSink(settings.name, settings.url, settings.signing_secrets(), ctx.http, ctx.timeout_s, cloud)


PLUGIN = SinkPlugin(
    settings=WebhookSinkSettings,
    build=_build,
    hold=lambda s: s.url or "",  # unpaced; a 429's Retry-After holds the receiver for the fleet (design 5b)
    notifies_people=False,
    every_job=True,
    probe_url=lambda s: s.url,
)
