"""Slack sink: a Block Kit incident card posted to an incoming webhook.

Untrusted text (job data, errors, model output) is mrkdwn-escaped (`&`, `<`,
`>`), bare `@channel`/`@here`/`@everyone` are broken with a zero-width space,
and mrkdwn objects are `verbatim`, so nothing in a dead letter can mention
people or smuggle a link. Slack's limits are kept by truncating, never by
failing. The webhook URL is a secret: never logged, never in an error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, model_validator

from bridge.config.base import check_http_url
from bridge.models import Alert, Notification, Severity
from bridge.secret_fields import RequiredSecret, secret_env, secret_file
from bridge.sinks import digest
from bridge.sinks.config import GroupBy, SinkSettingsBase
from bridge.sinks.http_errors import post
from bridge.sinks.plugin import Pace, SinkContext, SinkPlugin

MAX_BLOCKS = 50
HEADER_CHARS = 150
TEXT_CHARS = 3000
FIELD_CHARS = 2000
MAX_FIELDS = 10
ERROR_CHARS = 1500
EXCERPT_CHARS = 600

_EMOJI = {Severity.CRITICAL: "🚨", Severity.ERROR: "🔴", Severity.WARNING: "🟠", Severity.INFO: "🔵"}
_MENTION = re.compile(r"@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")


def escape(text: str) -> str:
    """mrkdwn-escape `&`, `<`, `>` and defuse bare broadcast mentions."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub("@\u200b", text)


def clip(text: str, limit: int) -> str:
    """Cut already-escaped text to `limit` chars with `…`, never inside an entity."""
    if len(text) <= limit:
        return text
    cut = _ENTITY_TAIL.sub("", text[: limit - 1])
    return cut + "…"


def esc(text: str, limit: int) -> str:
    """Escape then clip; escaping only grows text, so the raw text is cut first."""
    return clip(escape(text[:limit]), limit)


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": clip(text, TEXT_CHARS), "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _field(label: str, value: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": clip(f"*{label}*\n{value}", FIELD_CHARS), "verbatim": True}


def _code(text: str, limit: int) -> str:
    return "```" + esc(text, limit).replace("```", "ˋˋˋ") + "```"


def header_text(alert: Alert) -> str:
    prefix = "[TEST] " if alert.is_test else ""
    return esc(f"{prefix}{_EMOJI[alert.severity]} {alert.summary.title}", HEADER_CHARS)


def fields(alert: Alert) -> list[dict[str, Any]]:
    dl = alert.dead_letter
    job = f"{dl.job_name or '?'} (id {dl.job_id})"
    items = [
        ("Severity", severity_text(alert)),
        ("Queue", dl.queue),
        ("Job", job),
        ("Attempts", "?" if dl.attempts is None else str(dl.attempts)),
        ("Correlation id", dl.correlation_id or "—"),
        ("First failed at", dl.first_failed_at or "—"),
    ]
    return [_field(label, esc(value, FIELD_CHARS)) for label, value in items][:MAX_FIELDS]


def severity_text(alert: Alert) -> str:
    """The routed severity; the summarizer's assessment beside it when it differs."""
    routed, assessed = alert.severity, alert.summary.severity
    return routed.value.upper() + ("" if assessed is routed else f" (assessed {assessed.value})")


def runbook_text(alert: Alert) -> str:
    hint = alert.summary.runbook_hint
    if alert.runbook_url:
        url = escape(alert.runbook_url).replace("|", "%7C")
        return f"*Runbook*\n<{url}|{esc(hint or 'open runbook', 200)}>"
    if hint:
        return f"*Runbook*\n`{esc(hint, 200)}`"
    return "*Runbook*\nno runbook matched"


def source_text(alert: Alert) -> str:
    summary = alert.summary
    names = {"openclaw": "OpenClaw", "cache": "OpenClaw (cached)", "fallback": "static fallback"}
    text = f"Summary: {names.get(summary.source.value, summary.source.value)}"
    if summary.fallback_reason:
        text += f" ({esc(summary.fallback_reason, 100)})"
    return f"{text} · dlq-bridge · key `{esc(alert.idempotency_key, 500)}`"


def body_blocks(alert: Alert) -> list[dict[str, Any]]:
    dl, summary = alert.dead_letter, alert.summary
    steps = "\n".join(f"{i}. {esc(s, 600)}" for i, s in enumerate(summary.next_steps, 1))
    blocks: list[dict[str, Any]] = [{"type": "section", "fields": fields(alert)}]
    if not alert.cause_repeats_error:
        blocks.append(_section(f"*Likely cause*\n{esc(summary.likely_cause, TEXT_CHARS)}"))
    blocks.append(_section(f"*Next steps*\n{steps}"))
    if dl.last_error:
        blocks.append(_section(f"*Last error*\n{_code(dl.last_error, ERROR_CHARS)}"))
    if dl.parse_error:
        blocks.append(_section(f"*Unparseable entry*\n{esc(dl.parse_error, 500)}"))
    if dl.payload_excerpt:
        blocks.append(_section(f"*Payload excerpt*\n{_code(dl.payload_excerpt, EXCERPT_CHARS)}"))
    blocks.append(_section(runbook_text(alert)))
    blocks.append({"type": "context", "elements": [_mrkdwn(source_text(alert))]})
    return blocks


TEST_NOTE = "🧪 *TEST alert* sent by `dlq-bridge send-test`: no action needed."


def render_card(alert: Alert) -> dict[str, Any]:
    """The incoming-webhook body: Block Kit card plus plain `text` fallback."""
    header = {"type": "header", "text": {"type": "plain_text", "text": header_text(alert)}}
    blocks: list[dict[str, Any]] = [header]
    if alert.is_test:
        blocks.append({"type": "context", "elements": [_mrkdwn(TEST_NOTE)]})
    blocks.extend(body_blocks(alert))
    return {
        "text": fallback_text(alert),
        "blocks": blocks[:MAX_BLOCKS],
        "unfurl_links": False,
        "unfurl_media": False,
    }


def fallback_text(alert: Alert) -> str:
    dl = alert.dead_letter
    prefix = "[TEST] " if alert.is_test else ""
    text = (
        f"{prefix}[{alert.severity.value.upper()}] {alert.summary.title}"
        f" (queue {dl.queue}, job {dl.job_name or '?'} {dl.job_id})"
    )
    return esc(text, TEXT_CHARS)


# ---- group digests (docs/design.md, section 5b) -------------------------------------
#
# ┌──────────────────────────────────────────────────────────────────────┐
# │ 🔴 ship_order failed on orders · 2,990 jobs                          │ header
# │ *2,980 more since 2026-11-30 17:02:10 UTC, 2,990 in all.*            │ what changed
# │ Severity ERROR          Jobs 2,990 (2,980 new)                       │ fields
# │ Queues orders ×2,980 · billing ×10                                   │
# │ First seen …17:01:58 UTC   Last seen …17:03:10 UTC                   │
# │ Likely cause / Next steps / Last error (first job)                   │
# │ Sample jobs (10 of 2,980 new): `orders/job-11` …                     │
# │ Runbook                                                              │
# │ Digest #2 · fingerprint 3f2a… · Summary: OpenClaw · dlq-bridge       │ context
# └──────────────────────────────────────────────────────────────────────┘

SAMPLE_CHARS = 200
QUEUES_CHARS = 1000
MAX_TOTAL_CHARS = 12000  # Slack rejects long block sets (msg_blocks_too_long) near 13k


def group_header(n: Notification) -> str:
    """`🔴 <title> · 2,990 jobs`: the title is cut, never the count."""
    prefix = "[TEST] " if n.first.is_test else ""
    count = f" · {digest.jobs_word(n.count)}"
    title = esc(f"{prefix}{_EMOJI[n.severity]} {n.first.summary.title}", HEADER_CHARS - len(count))
    return title + count


def group_fields(n: Notification) -> list[dict[str, Any]]:
    new = f" ({n.new_count:,} new)" if n.sequence > 1 else ""
    items = [
        ("Severity", n.severity.value.upper()),
        ("Jobs", f"{n.count:,}{new}"),
        ("Group", digest.group_label(n)),
        ("First seen", digest.when(n.first_seen)),
        ("Last seen", digest.when(n.last_seen)),
    ]
    fields = [_field(label, esc(value, QUEUES_CHARS)) for label, value in items]
    queues = digest.queues_line(n, escape=lambda t: esc(t, 300), budget=QUEUES_CHARS)
    fields.insert(2, _field("Queues", queues))
    return fields


def samples_text(n: Notification) -> str:
    shown = n.jobs[:MAX_FIELDS]
    of = f"{n.new_count:,} new" if n.sequence > 1 and n.kind != "repeat" else f"{n.count:,}"
    head = f"*Sample jobs* ({len(shown)} of {of})" if shown else "*Sample jobs*"
    lines = ["`" + esc(f"{j.queue}/{j.job_id}", SAMPLE_CHARS).replace("`", "ˋ") + "`" for j in shown]
    return head + "\n" + (" · ".join(lines) or "—")


def group_blocks(n: Notification) -> list[dict[str, Any]]:
    alert, summary = n.first, n.first.summary
    steps = "\n".join(f"{i}. {esc(s, 600)}" for i, s in enumerate(summary.next_steps, 1))
    blocks = [
        _section(f"*{esc(digest.change_line(n), 500)}*"),
        {"type": "section", "fields": group_fields(n)},
        _section(f"*Likely cause*\n{esc(summary.likely_cause, TEXT_CHARS)}"),
        _section(f"*Next steps*\n{steps}"),
    ]
    if alert.dead_letter.last_error:
        error = _code(alert.dead_letter.last_error, ERROR_CHARS)
        blocks.append(_section(f"*Last error* (first job)\n{error}"))
    blocks.append(_section(samples_text(n)))
    blocks.append(_section(runbook_text(alert)))
    context = f"{digest.title(n)} · {esc(digest.group_label(n), 300)} · {source_text(alert)}"
    blocks.append({"type": "context", "elements": [_mrkdwn(context)]})
    return blocks


def render_group_card(n: Notification) -> dict[str, Any]:
    """A group's card; a group of one is exactly the job's own card."""
    if n.is_single:
        return render_card(n.first)
    header = {"type": "header", "text": {"type": "plain_text", "text": group_header(n)}}
    blocks: list[dict[str, Any]] = [header]
    if n.first.is_test:
        blocks.append({"type": "context", "elements": [_mrkdwn(TEST_NOTE)]})
    blocks.extend(group_blocks(n))
    return {
        "text": group_fallback_text(n),
        "blocks": blocks[:MAX_BLOCKS],
        "unfurl_links": False,
        "unfurl_media": False,
    }


def group_fallback_text(n: Notification) -> str:
    prefix = "[TEST] " if n.first.is_test else ""
    text = (
        f"{prefix}[{n.severity.value.upper()}] {n.first.summary.title}: "
        f"{digest.change_line(n)} Queues: {digest.queues_line(n, limit=3)}"
    )
    return esc(text, TEXT_CHARS)


class SlackSink:
    """Posts one card per attempt to one incoming webhook (pacing: bridge.delivery)."""

    type = "slack"

    def __init__(
        self, name: str, url: SecretStr, http: httpx.AsyncClient, timeout_s: float = 10.0
    ) -> None:
        self.name = name
        self._url = url
        self._http = http
        self._timeout_s = timeout_s

    def render(self, alert: Alert) -> dict[str, Any]:
        return render_card(alert)

    async def send(self, alert: Alert) -> None:
        body = json.dumps(self.render(alert), ensure_ascii=False).encode()
        url = self._url.get_secret_value()
        await post(
            self._http, self.name, alert.idempotency_key, url,
            content=body, headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[url],
        )

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return render_group_card(notification)

    async def send_group(self, notification: Notification) -> None:
        body = json.dumps(self.render_group(notification), ensure_ascii=False).encode()
        url = self._url.get_secret_value()
        await post(
            self._http, self.name, notification.ledger_key, url,
            content=body, headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[url],
        )


class SlackSinkSettings(SinkSettingsBase):
    type: Literal["slack"] = Field(description="Sink type.")
    url: RequiredSecret = Field(
        default=None, description="Incoming-webhook URL, a secret: prefer `url_env` or `url_file`."
    )
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    messages_per_second: float = Field(default=1.0, gt=0, description="Pacing per Slack webhook.")
    group_by: GroupBy = Field(
        default="fingerprint", description="How alerts are grouped: `fingerprint`, `queue` or `none`"
    )

    @model_validator(mode="after")
    def _url_shape(self) -> SlackSinkSettings:
        if self.url is not None:
            check_http_url(self.url.get_secret_value(), f"sink {self.name}: webhook url")
        return self

    def webhook_url(self) -> str:
        assert self.url is not None
        return self.url.get_secret_value()


def _build(settings: SlackSinkSettings, ctx: SinkContext) -> SlackSink:
    assert settings.url is not None
    return SlackSink(settings.name, settings.url, ctx.http, ctx.timeout_s)


PLUGIN = SinkPlugin(
    settings=SlackSinkSettings,
    build=_build,
    pace=lambda s: Pace(s.webhook_url(), s.messages_per_second),
    probe_url=SlackSinkSettings.webhook_url,
)
