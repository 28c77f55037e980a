"""`OtelTelemetry`: the bridge's spans through the OpenTelemetry SDK (imported only with tracing on).

A `TracerProvider` of its own, passed in (the SDK's global provider is never set); sampling by
`ParentBased(TraceIdRatioBased(sample_ratio))`, so a delivery on any replica follows the decision
taken when its dead letter was claimed; a `BatchSpanProcessor` with a bounded queue exports on its
own thread, so a collector that is down or slow costs dropped spans, never a delayed alert.
Exceptions are recorded as `error.type` only: their messages may quote a payload.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from bridge.config.tracing import TracingSettings
from bridge.core.trace_context import TraceContext
from bridge.telemetry.attributes import model_request
from bridge.telemetry.port import NO_SPAN, AttributeValue, SpanHandle

SCOPE = "dlq_bridge"
QUEUE_MAX = 2048  # spans waiting for export; more are dropped (counted by the SDK), never waited for
BATCH_MAX = 512
MADE_MAX = 1024  # remembered summary calls, by subject, for the jobs a cached summary serves


class _Span:
    """A `SpanHandle` over an SDK span."""

    __slots__ = ("failed", "span")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.failed = False

    def set(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self.span.set_attribute(key, value)

    def fail(self, error_type: str) -> None:
        self.failed = True
        self.span.set_attribute("error.type", error_type)
        self.span.set_status(Status(StatusCode.ERROR))

    def link(self, traceparent: str | None, relation: str) -> None:
        context = span_context(traceparent)
        if context is not None:
            self.span.add_link(context, {"dlq_bridge.link": relation})


class _Scope:
    """The span current while inside (a plain class: a generator context manager costs more per span)."""

    __slots__ = ("handle", "token")

    def __init__(self, span: trace.Span) -> None:
        self.handle = _Span(span)
        self.token: object = None

    def __enter__(self) -> _Span:
        self.token = otel_context.attach(trace.set_span_in_context(self.handle.span))
        return self.handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is not None and not self.handle.failed:  # the caller's own error type stands
            self.handle.fail(exc_type.__name__)
        otel_context.detach(self.token)  # type: ignore[arg-type]
        self.handle.span.end()


def span_context(traceparent: str | None) -> SpanContext | None:
    """The remote span context a validated `traceparent` names."""
    parsed = TraceContext.parse(traceparent) if traceparent else None
    if parsed is None:
        return None
    flags = TraceFlags(int(parsed.flags, 16) & TraceFlags.SAMPLED)
    return SpanContext(int(parsed.trace_id, 16), int(parsed.span_id, 16), is_remote=True, trace_flags=flags)


def traceparent_of(context: SpanContext) -> str | None:
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class OtelTelemetry:
    """Spans for claim, intake, summarize (and its model call), hand-off and every delivery."""

    enabled = True

    def __init__(self, settings: TracingSettings, release: str, exporter: OTLPSpanExporter | None = None) -> None:
        self._timeout_s = settings.export_timeout_s
        resource = Resource.create({"service.name": settings.service_name, "service.version": release})
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self.provider = TracerProvider(resource=resource, sampler=sampler, shutdown_on_exit=False)  # see shutdown()
        exporter = exporter or OTLPSpanExporter(endpoint=settings.otlp_endpoint, timeout=settings.export_timeout_s)
        self.provider.add_span_processor(
            BatchSpanProcessor(
                exporter,
                max_queue_size=QUEUE_MAX,
                max_export_batch_size=BATCH_MAX,
                export_timeout_millis=settings.export_timeout_s * 1000,
            )
        )
        self._tracer = self.provider.get_tracer(SCOPE, release)
        self._calls: dict[str, trace.Span] = {}  # summary calls in flight, by subject
        self._made: OrderedDict[str, SpanContext] = OrderedDict()

    def _current(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        context: otel_context.Context | None = None,
        start_ns: int | None = None,
    ) -> _Scope:
        span = self._tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            start_time=start_ns,
            record_exception=False,
            set_status_on_exception=False,
        )
        return _Scope(span)

    @contextmanager
    def entry(self, source_key: str, claimed_at: float, claims: int, system: str) -> Iterator[_Span]:
        now_ns = time.time_ns()
        start_ns = now_ns - int(max(time.monotonic() - claimed_at, 0.0) * 1e9) if claimed_at else now_ns
        attributes: dict[str, AttributeValue] = {
            "messaging.system": system,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": source_key,
        }
        with self._current(
            f"process {source_key}", SpanKind.CONSUMER, attributes, otel_context.Context(), start_ns
        ) as root:
            if not root.span.is_recording():  # sampled out: no child is made either
                yield root
                return
            claim = self._tracer.start_span(
                "claim",
                kind=SpanKind.CONSUMER,
                start_time=start_ns,
                attributes={
                    "messaging.system": system,
                    "messaging.operation.type": "receive",
                    "messaging.operation.name": "claim",
                    "messaging.destination.name": source_key,
                    "dlq_bridge.claims": claims,
                },
            )
            claim.end(now_ns)
            yield root

    def stage(self, name: str, **attributes: AttributeValue) -> AbstractContextManager[SpanHandle]:
        if not trace.get_current_span().is_recording():  # a sampled-out dead letter costs no more spans
            return NO_SPAN
        return self._current(name, SpanKind.INTERNAL, attributes)

    def current_traceparent(self) -> str | None:
        return traceparent_of(trace.get_current_span().get_span_context())

    def delivery(self, sink: str, sink_type: str, parent: str | None) -> AbstractContextManager[SpanHandle]:
        remote = span_context(parent)
        if remote is not None and not remote.trace_flags.sampled:  # its dead letter was sampled out
            return NO_SPAN
        context = trace.set_span_in_context(NonRecordingSpan(remote)) if remote else otel_context.Context()
        attributes: dict[str, AttributeValue] = {
            "messaging.system": sink_type,
            "messaging.operation.type": "send",
            "messaging.operation.name": "deliver",
            "messaging.destination.name": sink,
        }
        return self._current(f"deliver {sink}", SpanKind.PRODUCER, attributes, context)

    def model_call(self, model: str, subject: str) -> AbstractContextManager[SpanHandle]:
        if not trace.get_current_span().is_recording():
            return NO_SPAN
        return self._model_call(model, subject)

    @contextmanager
    def _model_call(self, model: str, subject: str) -> Iterator[_Span]:
        with self._current(f"chat {model}", SpanKind.CLIENT, model_request(model)) as call:
            if subject:
                self._calls[subject] = call.span
            try:
                yield call
            finally:
                if subject and self._calls.get(subject) is call.span:
                    del self._calls[subject]
                    self._remember(subject, call.span.get_span_context())

    def joining(self, subject: str) -> bool:
        """A call for `subject` is running: it and the current job's span link each other."""
        job, call = trace.get_current_span(), self._calls.get(subject)
        if call is None or not job.is_recording():
            return False
        job.add_link(call.get_span_context(), {"dlq_bridge.link": "summary"})
        if call.is_recording():
            call.add_link(job.get_span_context(), {"dlq_bridge.link": "served"})
        return True

    def served(self, subject: str) -> None:
        """The current job's summary came from the cache: link the call (made here) that made it."""
        job, made = trace.get_current_span(), self._made.get(subject)
        if made is not None and job.is_recording():
            job.add_link(made, {"dlq_bridge.link": "summary"})

    def _remember(self, subject: str, context: SpanContext) -> None:
        self._made[subject] = context
        self._made.move_to_end(subject)
        while len(self._made) > MADE_MAX:
            self._made.popitem(last=False)

    def shutdown(self) -> None:
        """Flush and stop on a daemon thread, waited for at most the export timeout (and a little)."""
        stopper = threading.Thread(target=self.provider.shutdown, name="dlq-bridge-otel-shutdown", daemon=True)
        stopper.start()
        stopper.join(self._timeout_s + 0.5)
