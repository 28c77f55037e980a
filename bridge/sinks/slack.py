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
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr

from bridge.core.models import Alert, Notification, Severity
from bridge.core.trace_context import TraceLink
from bridge.sinks import digest, trace_links
from bridge.sinks.http_errors import post
from bridge.sinks.sink_plugin import Pace, SinkContext, SinkPlugin
from bridge.sinks.sink_settings import ChatWebhookSettings

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


def _trace_ref(link: TraceLink) -> str:
    if link.url:
        return f"<{escape(link.url).replace('|', '%7C')}|View trace>"
    return f"`{link.trace_id}`"


def trace_text(alert: Alert) -> str | None:
    """`*Trace*` with a "View trace" link (`[tracing] trace_url`), else the trace id as text."""
    link = alert.trace_link
    return None if link is None else f"*Trace*\n{_trace_ref(link)}"


def group_trace_text(n: Notification) -> str | None:
    """The group's own trace (whose it is) and each listed job's, bounded (bridge.sinks.trace_links)."""
    own, listed = n.first.trace_link, trace_links.listed(n)
    if own is None and not listed:
        return None
    lines = [f"*Trace* ({esc(trace_links.own_note(n) or '', 300)})\n{_trace_ref(own)}"] if own else []
    jobs = [f"`{esc(job_id, 100).replace('`', 'ˋ')}` {_trace_ref(link)}" for job_id, link in listed]
    if jobs:
        lines.append(f"*Job traces* ({len(jobs)} listed)\n" + " · ".join(jobs))
    return "\n".join(lines)


def source_text(alert: Alert) -> str:
    return f"{esc(digest.summary_source(alert), 200)} · dlq-bridge · key `{esc(alert.idempotency_key, 500)}`"


def body_blocks(alert: Alert) -> list[dict[str, Any]]:
    dl, summary = alert.dead_letter, alert.summary
    steps = "\n".join(f"{i}. {esc(s, 600)}" for i, s in enumerate(summary.next_steps, 1))
    blocks: list[dict[str, Any]] = [{"type": "section", "fields": fields(alert)}]
    if alert.seen_before is not None:
        blocks.append(_section(esc(alert.seen_before.line(), TEXT_CHARS)))
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
    trace = trace_text(alert)
    if trace:
        blocks.append(_section(trace))
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


# ---- group digests (docs/design.md, sections 5b and 5d) ----------------------------
#
# ┌──────────────────────────────────────────────────────────────────────┐
# │ 🔴 ship_order failed on orders · 2,990 jobs                          │ header (an outage: "postgres-
# │ *2,980 more since 2026-11-30 17:02:10 UTC, 2,990 in all.*            │  primary:5432 unreachable —
# │ Severity ERROR          Jobs 2,990 (2,980 new)                       │  12 queues, 1,840 jobs")
# │ Group one failure of ship_order in queue orders: TimeoutError …      │ fields: digest.facts
# │ Job names ship_order ×2,990   Queues orders ×2,980 · billing ×10     │
# │ Kinds list ×2,990   First seen …17:01:58 UTC   Last seen …           │
# │ Likely cause / Next steps / Last error (first job)                   │
# │ Sample jobs (10 of 2,980 new): `orders/job-11` …                     │
# │ Runbook                                                              │
# │ Digest #2 · one failure of ship_order in queue orders: … · Summary … │ context
# └──────────────────────────────────────────────────────────────────────┘

SAMPLE_CHARS = 200
QUEUES_CHARS = 1000
MAX_TOTAL_CHARS = 12000  # Slack rejects long block sets (msg_blocks_too_long) near 13k


def group_header(n: Notification) -> str:
    """`🔴 <title> · 2,990 jobs`: the title is cut, never the count (an outage's title ends with it)."""
    prefix = "[TEST] " if n.first.is_test else ""
    count = "" if n.outage else f" · {digest.jobs_word(n.count)}"  # an outage's title holds the count
    title = esc(f"{prefix}{_EMOJI[n.severity]} {digest.headline(n)}", HEADER_CHARS - len(count))
    return title + count


def group_fields(n: Notification) -> list[dict[str, Any]]:
    new = f" ({n.new_count:,} new)" if n.sequence > 1 else ""
    fields = [_field("Severity", n.severity.value.upper()), _field("Jobs", f"{n.count:,}{new}")]
    escape = lambda t: esc(t, 300)  # noqa: E731
    for label, value in digest.facts(n, escape=escape, budget=QUEUES_CHARS):
        fields.append(_field(label, value if label in ("Job names", "Queues") else esc(value, QUEUES_CHARS)))
    fields.append(_field("First seen", esc(digest.when(n.first_seen), 100)))
    fields.append(_field("Last seen", esc(digest.when(n.last_seen), 100)))
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
        *_spans(n),
        _section(f"*Likely cause*\n{esc(summary.likely_cause, TEXT_CHARS)}"),
        _section(f"*Next steps*\n{steps}"),
    ]
    if alert.dead_letter.last_error:
        error = _code(alert.dead_letter.last_error, ERROR_CHARS)
        blocks.append(_section(f"*Last error* (first job)\n{error}"))
    blocks.append(_section(samples_text(n)))
    blocks.append(_section(runbook_text(alert)))
    trace = group_trace_text(n)
    if trace:
        blocks.append(_section(clip(trace, TEXT_CHARS)))
    context = f"{digest.title(n)} · {esc(digest.group_label(n), 300)} · {source_text(alert)}"
    blocks.append({"type": "context", "elements": [_mrkdwn(context)]})
    return blocks


def _spans(n: Notification) -> list[dict[str, Any]]:
    """A cause group's queues with their first and last times (the fields hold only counts)."""
    if not n.by_cause:
        return []
    return [_section("*Queues, first–last*\n" + "\n".join(esc(line, 200) for line in digest.queue_spans(n)))]


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
        f"{prefix}[{n.severity.value.upper()}] {digest.headline(n)}: "
        f"{digest.change_line(n)} Jobs: {digest.jobs_line(n, limit=3)}. Queues: {digest.queues_line(n, limit=3)}"
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


class SlackSinkSettings(ChatWebhookSettings):
    type: Literal["slack"] = Field(description="Sink type.")
    messages_per_second: float = Field(default=1.0, gt=0, description="Pacing per Slack webhook.")


def _build(settings: SlackSinkSettings, ctx: SinkContext) -> SlackSink:
    assert settings.url is not None
    return SlackSink(settings.name, settings.url, ctx.http, ctx.timeout_s)


PLUGIN = SinkPlugin(
    settings=SlackSinkSettings,
    build=_build,
    pace=lambda s: Pace(s.webhook_url(), s.messages_per_second),
    probe_url=SlackSinkSettings.webhook_url,
)
