"""`[tracing]`: links from alerts to a job's trace, and the bridge's own spans over OTLP/HTTP."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from bridge.config.section import Section, check_http_url

TRACE_ID_SLOT = "{trace_id}"
_BRACES = re.compile(r"[{}]")


class TracingSettings(Section):
    """Trace links and the bridge's own telemetry (docs/tracing.md); everything off by default."""

    trace_url: str | None = Field(
        default=None,
        description="Link template for a job's trace: an http(s) URL holding `{trace_id}` once, replaced by the "
        "validated 32-hex trace id (`https://tempo.example/explore?traceId={trace_id}`). Unset: the trace id "
        "is shown as text.",
    )
    otlp_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP traces endpoint (`http://collector:4318/v1/traces`) the bridge exports its own "
        "spans to; unset: no spans are made.",
    )
    sample_ratio: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Share of dead letters whose bridge trace is recorded (0 to 1)."
    )
    service_name: str = Field(
        default="dlq-bridge", min_length=1, max_length=100, description="`service.name` of the exported spans."
    )
    export_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="Timeout of one export to the collector; alerting never waits on it."
    )

    @field_validator("trace_url")
    @classmethod
    def _one_trace_id_slot(cls, value: str | None) -> str | None:
        if value is None:
            return None
        check_http_url(value, "tracing.trace_url")
        if value.count(TRACE_ID_SLOT) != 1 or len(_BRACES.findall(value)) != 2:
            raise ValueError("tracing.trace_url must hold `{trace_id}` exactly once and no other braces")
        return value

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "tracing.otlp_endpoint")

    def trace_link(self, trace_id: str) -> str | None:
        """The link to `trace_id` (already validated: 32 lowercase hex), or None without a template."""
        return None if self.trace_url is None else self.trace_url.replace(TRACE_ID_SLOT, trace_id)
