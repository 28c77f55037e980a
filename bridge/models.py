"""The data that flows through the pipeline: envelope, summary, alert.

Stages depend on these models, never on each other.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


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
    queue: str  # the route's queue: the source's own, never the payload's (docs/design.md, section 2b)
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
    reported_queue: str | None = None  # the `queue` the payload claims; shown, never routed on

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
    """What every sink renders: the envelope, its summary, and routing facts."""

    model_config = ConfigDict(frozen=True)

    dead_letter: DeadLetter
    summary: Summary
    runbook_url: str | None = None
    is_test: bool = False

    @property
    def idempotency_key(self) -> str:
        return self.dead_letter.idempotency_key

    @property
    def severity(self) -> Severity:
        return self.summary.severity
