"""CloudEvents 1.0 framing for webhook sinks (`format = "cloudevents"`; docs/sinks.md).

The event's `data` is exactly the webhook's own body (`dlq.alert` / `dlq.alert_group`), framed as

    specversion  "1.0"
    id           the idempotency key (`<queue>:<job_id>`, or a group notification's ledger key)
    source       `dlq-bridge/<consumer id>`
    type         `dev.dlq-bridge.alert` | `dev.dlq-bridge.alert_group`
    time         when it happened: the job's `first_failed_at` (when it is a timestamp), a group's `last_seen`
    subject      the queue
    severity     the routed severity (an extension attribute, for routing on an event bus)
    traceparent  the job's W3C trace context (the distributed-tracing extension; a group's: its first
                 job's), with `tracestate` when kept; absent without trace context

Structured mode (the default) sends the whole event as `application/cloudevents+json`; binary mode
sends `data` as `application/json` with the attributes as `ce-*` headers (%-encoded as the HTTP
binding asks). Either way the body is the same on every retry, and the Standard Webhooks signature
headers are computed over exactly the bytes sent (`bridge.sinks.webhook`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from bridge.core.models import Alert, Notification
from bridge.sinks import digest

SPEC_VERSION = "1.0"
ALERT_TYPE = "dev.dlq-bridge.alert"
GROUP_TYPE = "dev.dlq-bridge.alert_group"
STRUCTURED_TYPE = "application/cloudevents+json"
DATA_TYPE = "application/json"
Mode = Literal["structured", "binary"]
# HTTP binding 3.1.3.2: printable ASCII except space, `"` and `%` goes as is; the rest is %-encoded
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')


@dataclass(frozen=True)
class Event:
    """One CloudEvent: its context attributes (strings) and its JSON `data`."""

    attributes: dict[str, str]
    data: dict[str, Any]


def source_of(consumer_id: str) -> str:
    return f"dlq-bridge/{consumer_id}"


def occurred_at(text: str | None) -> str | None:
    """`first_failed_at` as an RFC 3339 UTC timestamp; None when it is not a timestamp."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _attributes(ident: str, source: str, kind: str, time: str | None, subject: str, severity: str) -> dict[str, str]:
    attributes = {
        "specversion": SPEC_VERSION,
        "id": ident,
        "source": source,
        "type": kind,
        "datacontenttype": DATA_TYPE,
        "subject": subject,
        "severity": severity,
    }
    if time is not None:
        attributes["time"] = time
    return attributes


def alert_event(alert: Alert, data: dict[str, Any], source: str) -> Event:
    dl = alert.dead_letter
    attributes = _attributes(
        alert.idempotency_key, source, ALERT_TYPE, occurred_at(dl.first_failed_at), dl.queue, alert.severity.value
    )
    return Event(attributes | _distributed_tracing(alert), data)


def _distributed_tracing(alert: Alert) -> dict[str, str]:
    """The distributed-tracing extension: the (first) job's validated `traceparent` and `tracestate`."""
    context = alert.dead_letter.trace
    if context is None:
        return {}
    return {"traceparent": context.traceparent} | ({"tracestate": context.tracestate} if context.tracestate else {})


def group_event(n: Notification, data: dict[str, Any], source: str) -> Event:
    """A group of one is exactly its job's `dev.dlq-bridge.alert`."""
    if n.is_single:
        return alert_event(n.first, data, source)
    time = digest.iso(n.last_seen)
    attributes = _attributes(n.ledger_key, source, GROUP_TYPE, time, n.first.dead_letter.queue, n.severity.value)
    return Event(attributes | _distributed_tracing(n.first), data)


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def structured(event: Event) -> tuple[bytes, dict[str, str]]:
    """The whole event as the body (`application/cloudevents+json`)."""
    return _json({**event.attributes, "data": event.data}), {"Content-Type": STRUCTURED_TYPE}


def binary(event: Event) -> tuple[bytes, dict[str, str]]:
    """`data` as the body, the attributes as `ce-*` headers."""
    headers = {"Content-Type": DATA_TYPE}
    for name, value in event.attributes.items():
        if name != "datacontenttype":
            headers[f"ce-{name}"] = quote(value, safe=_HEADER_SAFE)
    return _json(event.data), headers


def frame(event: Event, mode: Mode) -> tuple[bytes, dict[str, str]]:
    """The body and content headers of `event` in `mode`."""
    return structured(event) if mode == "structured" else binary(event)
