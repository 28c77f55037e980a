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
from typing import Any

import httpx
from pydantic import SecretStr

from bridge.models import Alert, Severity
from bridge.sinks.http_errors import post

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
    blocks = [
        {"type": "section", "fields": fields(alert)},
        _section(f"*Likely cause*\n{esc(summary.likely_cause, TEXT_CHARS)}"),
        _section(f"*Next steps*\n{steps}"),
    ]
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
