"""What the stages call to make spans; `NO_TELEMETRY` when tracing is off.

The choice is made once, at build time (`bridge.telemetry.build`), and the object passed in: with
tracing off every call is a method of a no-op object that returns a shared no-op span, and nothing
of OpenTelemetry is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

AttributeValue = str | bool | int | float | Sequence[str]


class SpanHandle(Protocol):
    """One span the caller is inside of."""

    def set(self, key: str, value: AttributeValue | None) -> None:
        """An attribute (None: left unset)."""
        ...

    def fail(self, error_type: str) -> None:
        """The operation failed: `error.type` and an error status."""
        ...

    def link(self, traceparent: str | None, relation: str) -> None:
        """A span link to the context `traceparent` names (None: nothing), with `dlq_bridge.link = relation`."""
        ...


class Telemetry(Protocol):
    enabled: bool

    def entry(self, source_key: str, claimed_at: float, claims: int, system: str) -> AbstractContextManager[SpanHandle]:
        """The root span of one dead letter (its `claim` child from `claimed_at`, monotonic, to now)."""
        ...

    def stage(self, name: str, **attributes: AttributeValue) -> AbstractContextManager[SpanHandle]:
        """A child of the current span."""
        ...

    def current_traceparent(self) -> str | None:
        """The current span's context as a `traceparent` (None: no span, or tracing off)."""
        ...

    def delivery(self, sink: str, sink_type: str, parent: str | None) -> AbstractContextManager[SpanHandle]:
        """One delivery to one sink, a child of `parent` (the alert's `bridge_trace`) on any replica."""
        ...

    def model_call(self, model: str, subject: str) -> AbstractContextManager[SpanHandle]:
        """The gateway call that makes a summary (`gen_ai.*`), remembered for the jobs it serves."""
        ...

    def joining(self, subject: str) -> bool:
        """A summary call for `subject` is running here: it and the current span link each other."""
        ...

    def served(self, subject: str) -> None:
        """The current span's summary came from the cache: link the call (made here) for `subject`."""
        ...

    def shutdown(self) -> None:
        """Flush what is queued (bounded by the export timeout) and stop exporting."""
        ...


class _NoSpan:
    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, key: str, value: AttributeValue | None) -> None:
        return None

    def fail(self, error_type: str) -> None:
        return None

    def link(self, traceparent: str | None, relation: str) -> None:
        return None


NO_SPAN = _NoSpan()


class NoTelemetry:
    """Tracing off: no spans, no ids, nothing imported."""

    enabled = False

    def entry(self, source_key: str, claimed_at: float, claims: int, system: str) -> _NoSpan:
        return NO_SPAN

    def stage(self, name: str, **attributes: AttributeValue) -> _NoSpan:
        return NO_SPAN

    def current_traceparent(self) -> str | None:
        return None

    def delivery(self, sink: str, sink_type: str, parent: str | None) -> _NoSpan:
        return NO_SPAN

    def model_call(self, model: str, subject: str) -> _NoSpan:
        return NO_SPAN

    def joining(self, subject: str) -> bool:
        return False

    def served(self, subject: str) -> None:
        return None

    def shutdown(self) -> None:
        return None


NO_TELEMETRY: Telemetry = NoTelemetry()
