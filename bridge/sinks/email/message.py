"""Email messages for the email sink: a plain-text and an HTML part of the same facts as the Slack card.

The HTML is rendered by Jinja2 with autoescaping, so nothing in a dead letter or a model's reply can
add markup; its only link is the runbook URL, which the bridge builds itself (`runbooks.base_url`).
Header values (subject, names) are one line of printable text, so nothing can inject a header.

`Message-ID` is derived from the idempotency key and the raw digest (as the webhook's `webhook-id`),
so every retry of one alert carries the same id and a receiver or archive can recognise a resend.
A group's digests share `References` to the group's thread, so mail clients keep them together.
"""

from __future__ import annotations

import hashlib
import re
from email.message import EmailMessage

import jinja2

from bridge.core.models import Alert, Notification
from bridge.core.trace_context import TraceLink
from bridge.sinks import digest, trace_links
from bridge.sinks.signing import header_key, message_id

SUBJECT_CHARS = 200
ERROR_CHARS = 4000
EXCERPT_CHARS = 1500
SAMPLES = 20
_NOT_PRINTABLE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_TEXT_ENV = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined, trim_blocks=True,  # noqa: S701
                               lstrip_blocks=True)

_FACTS_HTML = """\
<table cellpadding="4" style="border-collapse:collapse">
{% for label, value in facts %}<tr><th align="left">{{ label }}</th><td>{{ value }}</td></tr>
{% endfor %}</table>
"""

HTML = _ENV.from_string("""\
<!DOCTYPE html>
<html><body style="font-family:sans-serif">
{% if test %}<p><em>TEST alert sent by dlq-bridge send-test: no action needed.</em></p>{% endif %}
<h2>{{ heading }}</h2>
{% if change %}<p><strong>{{ change }}</strong></p>{% endif %}
""" + _FACTS_HTML + """\
{% if cause %}<h3>Likely cause</h3><p>{{ cause }}</p>{% endif %}
<h3>Next steps</h3><ol>{% for step in steps %}<li>{{ step }}</li>{% endfor %}</ol>
{% if error %}<h3>Last error</h3><pre>{{ error }}</pre>{% endif %}
{% if excerpt %}<h3>Payload excerpt</h3><pre>{{ excerpt }}</pre>{% endif %}
{% if samples %}<h3>Sample jobs</h3><ul>{% for s in samples %}<li><code>{{ s }}</code></li>{% endfor %}</ul>{% endif %}
{% if traces %}<h3>Trace</h3><ul>{% for label, trace_id, url in traces %}
<li>{% if label %}{{ label }}: {% endif %}{% if url %}<a href="{{ url }}">View trace</a>{% else %}\
trace <code>{{ trace_id }}</code>{% endif %}</li>
{% endfor %}</ul>{% endif %}
<h3>Runbook</h3>
{% if runbook_url %}<p><a href="{{ runbook_url }}">{{ hint or "open runbook" }}</a></p>
{% elif hint %}<p><code>{{ hint }}</code></p>{% else %}<p>no runbook matched</p>{% endif %}
<p style="color:#666">{{ footer }}</p>
</body></html>
""")

TEXT = _TEXT_ENV.from_string("""\
{% if test %}TEST alert sent by dlq-bridge send-test: no action needed.

{% endif %}
{{ heading }}
{% if change %}{{ change }}
{% endif %}

{% for label, value in facts %}{{ label }}: {{ value }}
{% endfor %}
{% if cause %}
Likely cause:
{{ cause }}
{% endif %}

Next steps:
{% for step in steps %}{{ loop.index }}. {{ step }}
{% endfor %}
{% if error %}
Last error:
{{ error }}
{% endif %}
{% if excerpt %}
Payload excerpt:
{{ excerpt }}
{% endif %}
{% if samples %}
Sample jobs:
{% for s in samples %}  {{ s }}
{% endfor %}{% endif %}
{% if traces %}
Trace:
{% for label, trace_id, url in traces %}  {% if label %}{{ label }}: {% endif %}\
{{ "View trace: " ~ url if url else "trace " ~ trace_id }}
{% endfor %}{% endif %}

Runbook: {{ runbook_url or hint or "no runbook matched" }}
--
{{ footer }}
""")


def one_line(text: str, limit: int = SUBJECT_CHARS) -> str:
    """Printable text on one line, cut to `limit` (for a header value)."""
    flat = " ".join(_NOT_PRINTABLE.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cut(text: str | None, limit: int) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def subject(alert: Alert) -> str:
    """`[ERROR] ship_order failed on orders · queue orders · job ship_order (job-1)`."""
    dl = alert.dead_letter
    prefix = "[TEST] " if alert.is_test else ""
    return one_line(
        f"{prefix}[{alert.severity.value.upper()}] {alert.summary.title} · queue {dl.queue}"
        f" · job {dl.job_name or '?'} ({dl.job_id})"
    )


def group_subject(n: Notification) -> str:
    """`[ERROR] 2,990 jobs: ship_order failed on orders · queues orders ×2,980 · billing ×10 · Digest #2`;
    an outage: `[ERROR] postgres-primary:5432 unreachable — 12 queues, 1,840 jobs · queues … · Digest #1`."""
    prefix = "[TEST] " if n.first.is_test else ""
    jobs = "" if n.outage else f"{digest.jobs_word(n.count)}: "  # an outage's title holds the count
    queues = digest.queues_line(n, limit=3)
    return one_line(f"{prefix}[{n.severity.value.upper()}] {jobs}{digest.headline(n)} · queues {queues}"
                    f" · {digest.title(n)}")


def _alert_context(alert: Alert) -> dict[str, object]:
    dl, summary = alert.dead_letter, alert.summary
    routed, assessed = alert.severity, summary.severity
    severity = routed.value.upper() + ("" if assessed is routed else f" (assessed {assessed.value})")
    return {
        "test": alert.is_test,
        "heading": one_line(summary.title, 300),
        "change": "",
        "facts": [
            ("Severity", severity),
            ("Queue", dl.queue),
            ("Job", f"{dl.job_name or '?'} (id {dl.job_id})"),
            ("Attempts", "?" if dl.attempts is None else str(dl.attempts)),
            ("Correlation id", dl.correlation_id or "—"),
            ("First failed at", dl.first_failed_at or "—"),
            *([("Seen before", alert.seen_before.line().removeprefix("Seen before: "))]
              if alert.seen_before is not None else []),
        ],
        "cause": "" if alert.cause_repeats_error else summary.likely_cause,
        "steps": list(summary.next_steps),
        "error": _cut(dl.last_error, ERROR_CHARS),
        "excerpt": _cut(dl.payload_excerpt, EXCERPT_CHARS),
        "samples": [],
        "runbook_url": alert.runbook_url or "",
        "traces": _traces([("", alert.trace_link)]),
        "hint": summary.runbook_hint,
        "footer": f"{digest.summary_source(alert)} · dlq-bridge · key {alert.idempotency_key}",
    }


def _traces(links: list[tuple[str, TraceLink | None]]) -> list[tuple[str, str, str]]:
    """(label, trace id, link or "") of each job trace shown (bridge.sinks.trace_links)."""
    return [(one_line(label, 300), link.trace_id, link.url or "") for label, link in links if link is not None]


def _group_context(n: Notification) -> dict[str, object]:
    context = _alert_context(n.first)
    new = f" ({n.new_count:,} new)" if n.sequence > 1 else ""
    count = "" if n.outage else f" · {digest.jobs_word(n.count)}"  # an outage's title holds the count
    spans = digest.queue_spans(n) if n.by_cause else []
    context |= {
        "heading": one_line(f"{digest.headline(n)}{count}", 300),
        "change": digest.change_line(n),
        "facts": [
            ("Severity", n.severity.value.upper()),
            ("Jobs", f"{n.count:,}{new}"),
            *digest.facts(n),
            *([("Queues, first–last", " · ".join(spans))] if spans else []),
            ("First seen", digest.when(n.first_seen)),
            ("Last seen", digest.when(n.last_seen)),
        ],
        "excerpt": "",
        "samples": [f"{j.queue}/{j.job_id}" for j in n.jobs[:SAMPLES]],
        "traces": _traces(
            [(trace_links.own_note(n) or "", n.first.trace_link), *((f"job {j}", t) for j, t in trace_links.listed(n))]
        ),
        "footer": f"{digest.title(n)} · {digest.group_label(n)} · {context['footer']}",
    }
    return context


def domain_of(address: str) -> str:
    """The domain for Message-IDs: the sender's, else `dlq-bridge.invalid`."""
    domain = address.rpartition("@")[2].strip(" >")
    return domain if re.fullmatch(r"[A-Za-z0-9.-]+", domain or "") else "dlq-bridge.invalid"


def mail_id(key: str, raw_digest: str, sender: str) -> str:
    """`<…@domain>` from the idempotency key and digest: the same for every resend."""
    return f"<{message_id(key, raw_digest).removeprefix('msg_')}.dlq-bridge@{domain_of(sender)}>"


def thread_id(n: Notification, sender: str) -> str:
    """The Message-ID every digest of one opening of a group refers to."""
    seed = hashlib.sha256(f"{n.group_key}@{int(n.opened_at * 1000)}".encode()).hexdigest()[:32]
    return f"<{seed}.group.dlq-bridge@{domain_of(sender)}>"


def _message(subject_line: str, context: dict[str, object], sender: str, to: list[str]) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject_line
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg.set_content(TEXT.render(**context))
    msg.add_alternative(HTML.render(**context), subtype="html")
    return msg


def alert_message(alert: Alert, sender: str, to: list[str]) -> EmailMessage:
    msg = _message(subject(alert), _alert_context(alert), sender, to)
    msg["Message-ID"] = mail_id(alert.idempotency_key, alert.dead_letter.raw_digest, sender)
    msg["X-DLQ-Bridge-Key"] = header_key(alert.idempotency_key)
    return msg


def group_message(n: Notification, sender: str, to: list[str]) -> EmailMessage:
    """One mail per group notification; a group of one is exactly its job's mail."""
    if n.is_single:
        return alert_message(n.first, sender, to)
    msg = _message(group_subject(n), _group_context(n), sender, to)
    msg["Message-ID"] = mail_id(n.ledger_key, n.first.dead_letter.raw_digest, sender)
    msg["References"] = thread_id(n, sender)
    msg["X-DLQ-Bridge-Key"] = header_key(n.ledger_key)
    return msg
