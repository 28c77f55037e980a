"""Trace and span ids on every log record written inside a span (tracing on only).

The filter sets `trace_id` and `span_id` (empty outside a span) for structured handlers, and
`trace`, which the command line's format ends with: ` trace_id=<32 hex> span_id=<16 hex>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from opentelemetry import trace


class TraceIds(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
            record.__dict__.update(trace_id=trace_id, span_id=span_id, trace=f" trace_id={trace_id} span_id={span_id}")
        else:
            record.__dict__.update(trace_id="", span_id="", trace="")
        return True


def install_log_ids(logger: logging.Logger) -> Callable[[], None]:
    """Adds the filter to every handler of `logger` (the root: every record reaches them); returns its undo."""
    ids, handlers = TraceIds(), list(logger.handlers)
    for handler in handlers:
        handler.addFilter(ids)

    def undo() -> None:
        for handler in handlers:
            handler.removeFilter(ids)

    return undo
