"""The data that flows through the pipeline: envelope, summary, alert.

Stages depend on these models, never on each other.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator


class Severity(StrEnum):
    """PagerDuty's four severities, most urgent first."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more urgent: info 0 … critical 3."""
        return _RANK[self]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2, Severity.CRITICAL: 3}


class SummarySource(StrEnum):
    OPENCLAW = "openclaw"
    CACHE = "cache"
    FALLBACK = "fallback"


class FallbackReason(StrEnum):
    DISABLED = "disabled"
    TIMEOUT = "timeout"
    INVALID_JSON = "invalid_json"
    SCHEMA = "schema"
    CIRCUIT_OPEN = "circuit_open"
    BUDGET = "budget"
    ERROR = "error"


class DeadLetter(BaseModel):
    """One dead letter, normalized and redacted (DESIGN section 3)."""

    model_config = ConfigDict(frozen=True)

    source_key: str
    queue: str
    job_id: str
    job_name: str | None = None
    attempts: int | None = None
    correlation_id: str | None = None
    last_error: str | None = None
    first_failed_at: str | None = None
    payload_excerpt: str | None = None
    raw_digest: str
    parse_error: str | None = None
    fingerprint: str = ""

    @property
    def idempotency_key(self) -> str:
        return f"{self.queue}:{self.job_id}"


Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120)]
Cause = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
Step = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Hint = Annotated[str, StringConstraints(strip_whitespace=True, max_length=64)]


class SummaryDraft(BaseModel):
    """Exactly the five keys a summarizer (or OpenClaw) must produce."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: Title
    severity: Severity
    likely_cause: Cause
    next_steps: list[Step] = Field(min_length=1, max_length=4)
    runbook_hint: Hint = ""


class Summary(SummaryDraft):
    """A validated summary plus where it came from."""

    source: SummarySource
    fallback_reason: str | None = None

    def draft(self) -> SummaryDraft:
        return SummaryDraft.model_validate(self.model_dump(include=set(SummaryDraft.model_fields)))


class Alert(BaseModel):
    """What every sink renders: the envelope, its summary, and routing facts.

    `severity` is the routed severity, decided by configuration (`[severity]`,
    docs/design.md, section 5b); `summary.severity` is only the summarizer's
    assessment. Built without one, an alert is routed by the assessment.
    """

    model_config = ConfigDict(frozen=True)

    dead_letter: DeadLetter
    summary: Summary
    severity: Severity
    runbook_url: str | None = None
    is_test: bool = False

    @model_validator(mode="before")
    @classmethod
    def _severity_of_summary(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("severity") is None and "summary" in data:
            summary = data["summary"]
            assessed = summary.severity if isinstance(summary, Summary) else summary.get("severity")
            return {**data, "severity": assessed}
        return data

    @property
    def idempotency_key(self) -> str:
        return self.dead_letter.idempotency_key
