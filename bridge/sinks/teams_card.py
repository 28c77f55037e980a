"""Adaptive Cards (1.4) for the Teams sink: the same facts as the Slack card (docs/sinks.md, Teams).

    ┌──────────────────────────────────────────────────────────────┐
    │ ship_order failed on orders                                  │ title, in the severity's colour
    │ Severity ERROR · Queue orders · Job ship_order (id job-1) …  │ one line per fact
    │ Likely cause / Next steps / Last error / Payload excerpt     │
    │ Summary: OpenClaw · dlq-bridge · key orders:job-1            │ subtle footer
    │ [Open runbook]                                               │ the only link: runbooks.base_url
    └──────────────────────────────────────────────────────────────┘

Every piece of text that is not our own (job data, errors, model output) goes into a `TextRun` of a
`RichTextBlock`, which Adaptive Cards never read as markdown, and URL schemes in it are broken with a
zero-width space, so nothing in a dead letter can add a link, a mention or markup. The card's only
link is the runbook URL the bridge built. A Teams message takes about 28 KB: `fit` cuts the long
texts (error, excerpt, samples) step by step until the whole request body fits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bridge.core.models import Alert, Notification, Severity
from bridge.core.trace_context import TraceLink
from bridge.sinks import digest, trace_links

VERSION = "1.4"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
MAX_BYTES = 27 * 1024  # Teams rejects a message over about 28 KB; the envelope and headroom fit in the rest
ERROR_CHARS = 3000
EXCERPT_CHARS = 1500
TEXT_CHARS = 2000
SAMPLES = 10
SCALES = (1.0, 0.5, 0.25, 0.1, 0.0)

_STYLE = {Severity.CRITICAL: "attention", Severity.ERROR: "attention", Severity.WARNING: "warning",
          Severity.INFO: "accent"}
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029]")
_LINKISH = re.compile(r"(?i)(://|\bwww\.|\bmailto:)")


def plain(text: str, limit: int) -> str:
    """Untrusted text, cut to `limit`, with control characters gone and URLs made unclickable."""
    text = _CONTROLS.sub(" ", text[:limit])
    text = _LINKISH.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)
    return text if len(text) < limit else text[: limit - 1] + "…"


def run(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextRun", "text": text, **style}


def rich(*inlines: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "RichTextBlock", "inlines": list(inlines), **extra}


def heading(label: str) -> dict[str, Any]:
    return rich(run(label, weight="bolder"), spacing="medium")


def fact(label: str, value: str, scale: float = 1.0) -> dict[str, Any]:
    limit = max(200, int(TEXT_CHARS * scale))
    return rich(run(f"{label}: ", weight="bolder"), run(plain(value, limit)), spacing="none")


def monospace(text: str, limit: int) -> dict[str, Any]:
    return rich(run(plain(text, limit), fontType="monospace"))


def title_block(text: str, severity: Severity, test: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = [rich(run(plain(text, 300), size="large", weight="bolder"))]
    if test:
        items.append(rich(run("TEST alert sent by dlq-bridge send-test: no action needed.", italic=True)))
    return {"type": "Container", "style": _STYLE[severity], "bleed": True, "items": items}


def severity_text(alert: Alert) -> str:
    routed, assessed = alert.severity, alert.summary.severity
    return routed.value.upper() + ("" if assessed is routed else f" (assessed {assessed.value})")


def source_text(alert: Alert) -> str:
    return f"{digest.summary_source(alert)} · dlq-bridge · key {alert.idempotency_key}"


def summary_blocks(alert: Alert, scale: float, error_label: str = "Last error") -> list[dict[str, Any]]:
    dl, summary = alert.dead_letter, alert.summary
    blocks: list[dict[str, Any]] = []
    if not alert.cause_repeats_error:
        blocks += [heading("Likely cause"), rich(run(plain(summary.likely_cause, TEXT_CHARS)))]
    blocks.append(heading("Next steps"))
    blocks += [rich(run(f"{i}. "), run(plain(step, 600)), spacing="none") for i, step in
               enumerate(summary.next_steps, 1)]
    if dl.last_error and int(ERROR_CHARS * scale) > 0:
        blocks += [heading(error_label), monospace(dl.last_error, int(ERROR_CHARS * scale))]
    return blocks


def runbook_blocks(alert: Alert) -> list[dict[str, Any]]:
    hint = alert.summary.runbook_hint
    if alert.runbook_url:
        return []  # the action button
    return [heading("Runbook"), rich(run(plain(hint, 64) if hint else "no runbook matched"))]


def trace_blocks(alert: Alert, scale: float) -> list[dict[str, Any]]:
    """The trace id as text when there is no link (with `[tracing] trace_url` it is the "View trace" button)."""
    trace = alert.trace_link
    return [fact("Trace", trace.trace_id, scale)] if trace is not None and not trace.url else []


def group_trace_blocks(n: Notification, scale: float) -> list[dict[str, Any]]:
    """Whose trace the card's own is, then each listed job's trace (bounded: bridge.sinks.trace_links)."""
    note, listed = trace_links.own_note(n), trace_links.listed(n)
    blocks = [fact("Trace", note, scale)] if note else []
    if listed and scale >= 0.25:
        blocks.append(heading(f"Job traces ({len(listed)} listed)"))
        blocks += [rich(_trace_run(job_id, link), spacing="none") for job_id, link in listed]
    return blocks


def _trace_run(job_id: str, link: TraceLink) -> dict[str, Any]:
    if link.url:
        return run(plain(f"{job_id}: View trace", 200), selectAction={"type": "Action.OpenUrl", "url": link.url})
    return run(plain(f"{job_id}: trace {link.trace_id}", 200), fontType="monospace")


def footer(text: str) -> dict[str, Any]:
    return rich(run(plain(text, 800), isSubtle=True, size="small"), separator=True, spacing="medium")


def card(body: list[dict[str, Any]], alert: Alert, fallback: str) -> dict[str, Any]:
    content: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": VERSION,
        "fallbackText": plain(fallback, 300),
        "body": body,
    }
    actions = []
    if alert.runbook_url:
        title = plain(alert.summary.runbook_hint or "open runbook", 64)
        actions.append({"type": "Action.OpenUrl", "title": f"Runbook: {title}", "url": alert.runbook_url})
    trace = alert.trace_link
    if trace is not None and trace.url:
        actions.append({"type": "Action.OpenUrl", "title": "View trace", "url": trace.url})
    if actions:
        content["actions"] = actions
    return {"type": "message", "attachments": [{"contentType": CARD_TYPE, "contentUrl": None, "content": content}]}


def alert_body(alert: Alert, scale: float) -> list[dict[str, Any]]:
    dl = alert.dead_letter
    prefix = "[TEST] " if alert.is_test else ""
    body = [
        title_block(f"{prefix}{alert.summary.title}", alert.severity, alert.is_test),
        fact("Severity", severity_text(alert), scale),
        fact("Queue", dl.queue, scale),
        fact("Job", f"{dl.job_name or '?'} (id {dl.job_id})", scale),
        fact("Attempts", "?" if dl.attempts is None else str(dl.attempts), scale),
        fact("Correlation id", dl.correlation_id or "—", scale),
        fact("First failed at", dl.first_failed_at or "—", scale),
        *([fact("Seen before", alert.seen_before.line().removeprefix("Seen before: "), scale)]
          if alert.seen_before is not None else []),
        *summary_blocks(alert, scale),
    ]
    if dl.parse_error:
        body += [heading("Unparseable entry"), rich(run(plain(dl.parse_error, 500)))]
    if dl.payload_excerpt and int(EXCERPT_CHARS * scale) > 0:
        body += [heading("Payload excerpt"), monospace(dl.payload_excerpt, int(EXCERPT_CHARS * scale))]
    return [*body, *trace_blocks(alert, scale), *runbook_blocks(alert), footer(source_text(alert))]


def fallback_text(alert: Alert) -> str:
    dl = alert.dead_letter
    return f"[{alert.severity.value.upper()}] {alert.summary.title} (queue {dl.queue}, job {dl.job_id})"


def group_body(n: Notification, scale: float) -> list[dict[str, Any]]:
    alert = n.first
    prefix = "[TEST] " if alert.is_test else ""
    new = f" ({n.new_count:,} new)" if n.sequence > 1 else ""
    shown = n.jobs[: int(SAMPLES * scale)] if scale >= 0.25 else []
    count = "" if n.outage else f" · {digest.jobs_word(n.count)}"  # an outage's title holds the count
    spans = digest.queue_spans(n) if n.by_cause else []
    body = [
        title_block(f"{prefix}{digest.headline(n)}{count}", n.severity, alert.is_test),
        rich(run(plain(digest.change_line(n), 500), weight="bolder")),
        fact("Severity", n.severity.value.upper(), scale),
        fact("Jobs", f"{n.count:,}{new}", scale),
        *[fact(label, value, scale) for label, value in digest.facts(n, budget=max(100, int(900 * scale)))],
        *([fact("Queues, first–last", " · ".join(spans), scale)] if spans else []),
        fact("First seen", digest.when(n.first_seen), scale),
        fact("Last seen", digest.when(n.last_seen), scale),
        *summary_blocks(alert, scale, "Last error (first job)"),
    ]
    if shown:
        body += [heading(f"Sample jobs ({len(shown)} of {n.new_count if n.sequence > 1 else n.count:,})"),
                 *[rich(run(plain(f"{j.queue}/{j.job_id}", 200), fontType="monospace"), spacing="none")
                   for j in shown]]
    tail = f"{digest.title(n)} · {digest.group_label(n)} · {source_text(alert)}"
    return [*body, *group_trace_blocks(n, scale), *trace_blocks(alert, scale), *runbook_blocks(alert), footer(tail)]


def size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False).encode())


def fit(build: Callable[[float], dict[str, Any]]) -> dict[str, Any]:
    """The first of `build(scale)` for scales 1 → 0 that fits MAX_BYTES (the last one regardless)."""
    message: dict[str, Any] = {}
    for scale in SCALES:
        message = build(scale)
        if size(message) <= MAX_BYTES:
            break
    return message


def render_card(alert: Alert) -> dict[str, Any]:
    """The Workflows webhook body: a message with one Adaptive Card attachment."""
    return fit(lambda scale: card(alert_body(alert, scale), alert, fallback_text(alert)))


def render_group_card(n: Notification) -> dict[str, Any]:
    """A group's card; a group of one is exactly its job's card."""
    if n.is_single:
        return render_card(n.first)
    fallback = f"[{n.severity.value.upper()}] {digest.headline(n)}: {digest.change_line(n)}"
    return fit(lambda scale: card(group_body(n, scale), n.first, fallback))
