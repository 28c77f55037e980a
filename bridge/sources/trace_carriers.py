"""Where each job system keeps a job's W3C trace context: one small reader per carrier.

Each returns the `(traceparent, tracestate)` it found, already checked by the W3C rules and rebuilt
(`bridge.core.trace_context`), so the kind record's raw JSON never holds a hostile value; intake
validates them again the same way for every kind. Nothing here decodes more than JSON; a pickle is
never loaded (docs/tracing.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bridge.core.trace_context import TraceContext

Carried = tuple[str | None, str | None]
NONE: Carried = (None, None)
MAX_CARRIER_BYTES = 65_536  # a JSON carrier (RQ meta, BullMQ opts) larger than this is not read


def from_mapping(carrier: Any) -> Carried:
    """`traceparent`/`tracestate` keys of a dict (Sidekiq job hash, stream fields, message headers)."""
    if not isinstance(carrier, Mapping):
        return NONE
    return checked(carrier.get("traceparent"), carrier.get("tracestate"))


def as_fields(carried: Carried) -> dict[str, str]:
    """The found pair as envelope fields (none when nothing was found)."""
    traceparent, tracestate = carried
    if traceparent is None:
        return {}
    return {"traceparent": traceparent} | ({"tracestate": tracestate} if tracestate else {})


def checked(traceparent: Any, tracestate: Any = None) -> Carried:
    """The pair rebuilt from a valid W3C context; NONE when `traceparent` breaks a rule."""
    context = TraceContext.parse(traceparent, tracestate)
    return (context.traceparent, context.tracestate) if context is not None else NONE


def sidekiq(job: Mapping[str, Any]) -> Carried:
    """OpenTelemetry's Sidekiq instrumentation injects into the job hash itself."""
    return from_mapping(job)


def celery_headers(headers: Mapping[str, Any]) -> Carried:
    """AMQP message headers (`opentelemetry-instrumentation-celery` injects beside `id` and `task`);
    a producer that passed `headers=` to `apply_async` may nest them under `headers`."""
    found = from_mapping(headers)
    return found if found[0] is not None else from_mapping(headers.get("headers"))


def bullmq(opts: bytes | None, tm: bytes | None) -> Carried:
    """`bullmq-otel`: job `opts` JSON whose `tm` is a JSON string `{"traceparent": …}` (decoded
    twice); a failed job's top-level `tm` field holds the same."""
    options = _json(opts)
    inner = options.get("tm") if isinstance(options, dict) else None
    found = from_mapping(_json(inner) if isinstance(inner, str | bytes) else inner)
    return found if found[0] is not None else from_mapping(_json(tm))


def rq_meta(meta: bytes | None) -> Carried:
    """RQ job `meta` under the JSON serializer; the default pickle serializer's meta is not read."""
    return from_mapping(_json(meta))


def dramatiq(options: Mapping[str, Any]) -> Carried:
    """Dramatiq message options: `trace_ctx` (the OpenTelemetry Dramatiq middleware's dict), else
    `traceparent` set by a middleware of the application's own."""
    found = from_mapping(options.get("trace_ctx"))
    return found if found[0] is not None else from_mapping(options)


def sqs(message: Mapping[str, Any], body: Mapping[str, Any]) -> Carried:
    """SQS message attribute `traceparent` (String), else the body's own `traceparent` field, else
    the `AWSTraceHeader` system attribute converted."""
    attributes = message.get("MessageAttributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}
    found = checked(_attribute(attributes.get("traceparent")), _attribute(attributes.get("tracestate")))
    if found[0] is None:
        found = from_mapping(body)
    if found[0] is not None:
        return found
    system = message.get("Attributes")
    header = system.get("AWSTraceHeader") if isinstance(system, Mapping) else None
    context = TraceContext.from_aws_trace_header(header)
    return (context.traceparent, None) if context is not None else NONE


def stream_fields(fields: Mapping[bytes, bytes]) -> Carried:
    """`traceparent`/`tracestate` fields of a Redis stream entry."""
    return checked(fields.get(b"traceparent"), fields.get(b"tracestate"))


def _attribute(value: Any) -> Any:
    return value.get("StringValue") if isinstance(value, Mapping) else None


def _json(value: Any) -> Any:
    if not isinstance(value, str | bytes) or len(value) > MAX_CARRIER_BYTES:
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None
