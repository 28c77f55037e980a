"""The data that flows through the pipeline: envelope, summary, alert.

Stages depend on these models, never on each other.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from bridge.core.seen_before import SeenBefore
from bridge.core.trace_context import TraceContext, TraceLink


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


class DeadLetter(BaseModel):
    """One dead letter, normalized and redacted (docs/design.md, section 3)."""

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
    source_kind: str | None = None  # `sidekiq`, `bullmq`, … for a kind record; None for a list entry
    traceparent: str | None = None  # the job's W3C trace context, validated (bridge.core.trace_context)
    tracestate: str | None = None

    @property
    def trace(self) -> TraceContext | None:
        """The job's trace context, when the job system kept a valid one."""
        return TraceContext.parse(self.traceparent, self.tracestate) if self.traceparent else None

    @property
    def idempotency_key(self) -> str:
        """`<queue>:<job_id>` with the route's queue, for every kind (docs/design.md, section 2b).

        Two kinds sharing a queue name and a job id share a key; the delivery ledger
        also holds the raw digest, so neither alert suppresses the other.
        """
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
    """A validated summary plus where it came from.

    Stored in records other replicas read, so it ignores fields it does not know (a newer release
    may add some: bridge.core.formats); only the model's own reply (`SummaryDraft`) is strict.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    source: SummarySource
    fallback_reason: str | None = None
    repairs: tuple[str, ...] = ()  # reply fields the bridge repaired (bridge.summarize.salvage)

    def draft(self) -> SummaryDraft:
        return SummaryDraft.model_validate(self.model_dump(include=set(SummaryDraft.model_fields)))

    @property
    def fallback_text(self) -> str:
        """Why the static fallback wrote it, for a person (`fallback_reason` stays the machine's value:
        the metrics label and the webhook field)."""
        reason = self.fallback_reason or ""
        return FALLBACK_WORDS.get(reason, reason[:100])


FALLBACK_WORDS = {
    "disabled": "no gateway configured",
    "timeout": "the gateway did not answer in time",
    "budget": "the gateway's calls-per-minute budget was spent",
    "circuit_open": "the gateway failed repeatedly; calls paused for breaker_cooldown_s",
}


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
    trace_url: str | None = None  # `[tracing] trace_url` with the job's validated trace id (docs/tracing.md)
    bridge_trace: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The `traceparent` of the bridge's own span for this dead letter (tracing on): a delivery on any
    replica continues that trace (docs/tracing.md). Left out of the record when None."""
    seen_before: SeenBefore | None = None  # the cause's history when it arrived (None: first seen, or unknown)

    @property
    def trace_link(self) -> TraceLink | None:
        """The job's trace id and, with `[tracing] trace_url`, its link (checked against the id)."""
        return TraceLink.of(self.dead_letter.trace, self.trace_url)

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

    @property
    def cause_repeats_error(self) -> bool:
        """True when the likely cause only restates the last error (a fallback's cause is the error).

        Cards then show the error once, under "last error", and drop the "likely cause" line.
        """
        error, cause = self.dead_letter.last_error, self.summary.likely_cause
        if not error:
            return False
        head = " ".join(error.split())[: max(len(cause) - 1, 1)]
        return cause.startswith(head) or cause.rstrip("…") == head.rstrip()


class GroupJob(BaseModel):
    """One member of a group, as digests and `dlq.alert_group` events list it."""

    model_config = ConfigDict(frozen=True)

    idempotency_key: str
    queue: str
    job_id: str
    job_name: str | None = None
    attempts: int | None = None
    correlation_id: str | None = None
    first_failed_at: str | None = None
    last_error: str | None = None
    raw_digest: str = ""
    severity: Severity = Severity.INFO
    added_at: float = 0.0
    source_key: str = ""  # the DLQ it came from: a cause group spans many (the console redrives each from its own)
    source_kind: str | None = None
    traceparent: str | None = None  # the job's validated trace context and link, listed by digests
    trace_url: str | None = None

    @property
    def trace_link(self) -> TraceLink | None:
        context = TraceContext.parse(self.traceparent) if self.traceparent else None
        return TraceLink.of(context, self.trace_url)

    @classmethod
    def of(cls, alert: Alert, added_at: float, error_chars: int = 500) -> GroupJob:
        dl = alert.dead_letter
        error = dl.last_error[:error_chars] if dl.last_error else dl.last_error
        return cls(
            idempotency_key=alert.idempotency_key,
            queue=dl.queue,
            job_id=dl.job_id,
            job_name=dl.job_name,
            attempts=dl.attempts,
            correlation_id=dl.correlation_id,
            first_failed_at=dl.first_failed_at,
            last_error=error,
            raw_digest=dl.raw_digest,
            severity=alert.severity,
            added_at=added_at,
            source_key=dl.source_key,
            source_kind=dl.source_kind,
            traceparent=dl.traceparent,
            trace_url=alert.trace_url,
        )


NotificationKind = Literal["single", "digest", "repeat"]


class Notification(BaseModel):
    """One notification of one group to one sink (docs/design.md, section 5b).

    `single`: the group's first notification and it holds one job — sinks
    render it exactly as the job's own card. `digest`: the first notification
    of a larger group, or a later one because the group grew. `repeat`: the
    group did not grow for `repeat_interval_s` after its last notification.
    """

    model_config = ConfigDict(frozen=True)

    sink: str
    group_key: str
    kind: NotificationKind
    sequence: int
    count: int
    new_count: int
    previous_at: float | None
    first_seen: float
    last_seen: float
    queues: list[str]
    queue_counts: dict[str, int] = Field(default_factory=dict)
    job_counts: dict[str, int] = Field(default_factory=dict)
    """Jobs per job name ("" for jobs without one), as `queue_counts` per queue."""
    kind_counts: dict[str, int] = Field(default_factory=dict)
    """Jobs per source kind (`list` for a Redis list DLQ)."""
    queue_first: dict[str, float] = Field(default_factory=dict)
    queue_last: dict[str, float] = Field(default_factory=dict)
    """When the group's first and last job from each queue arrived."""
    outage: bool = False
    """A cause group over `outage_min_queues` queues or more (docs/design.md, section 5d)."""
    sample_job_ids: list[str]
    severity: Severity
    first: Alert
    jobs: list[GroupJob] = Field(default_factory=list)
    """The jobs new since the previous notification (webhooks: up to 500 per event, else ≤ 10)."""
    pending: int = 0
    """Jobs already in the group but left for the next notification (webhook paging)."""
    opened_at: float = 0.0
    """The group's first_seen as stored: names this opening of the group in ledger keys."""
    claim: str = ""
    """The lease token of the replica that claimed it; `Grouper.notified` checks it."""

    @property
    def is_single(self) -> bool:
        return self.kind == "single"

    @property
    def by_cause(self) -> bool:
        """A cause group (`group_by = "cause"`): one cause across queues and kinds, any of whose jobs came first."""
        return self.group_key.startswith("cause:")

    @property
    def ledger_key(self) -> str:
        """The job's idempotency key for a single; else one key per opening and sequence."""
        if self.is_single:
            return self.first.idempotency_key
        return f"group:{self.group_key}@{int(self.opened_at * 1000)}:{self.sequence}"
