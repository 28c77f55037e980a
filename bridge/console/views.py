"""What the console shows: typed, JSON-ready views read from the bridge's own stores.

Every `str` field that came from a dead letter or from the model is untrusted
data. The JSON API returns it as JSON strings; pages must escape it (also in
attributes and URLs). A URL is only ever offered as a live link through a
`Link` whose `clickable` is true, and that is only the case for runbook links
built by the bridge under `runbooks.base_url` (docs/design.md, section 6b).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bridge.core.models import Severity, SummarySource
from bridge.core.silence_match import MATCHERS_MAX, Matcher

DeliveryState = Literal["delivered", "duplicate", "undeliverable", "pending", "grouped", "silenced", "unknown"]
HealthState = Literal["ok", "degraded", "failing", "unknown"]
BreakerView = Literal["closed", "open", "half_open", "paused", "unknown"]


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class Link(View):
    """A URL shown as text; `clickable` only for runbook links under `runbooks.base_url`."""

    text: str = Field(description="What to show (untrusted unless clickable).")
    url: str = Field(description="The URL as plain text.")
    clickable: bool = Field(description="True only for the bridge's own runbook links.")


class SummarySourceCounts(View):
    openclaw: int = 0
    cache: int = 0
    fallback: int = 0


class SourceView(View):
    """One source: a `dead_letter:*` list (kind `list`) or a configured kind source."""

    source: str = Field(description="The source key (list) or the source's name (kind); the id in URLs.")
    kind: str = Field(description="`list`, `sidekiq`, `bullmq`, `rq`, `dramatiq`, `redis_stream`, `rabbitmq` or `sqs`.")
    queue: str = Field(description="The route's queue.")
    depth: int | None = Field(description="Dead letters waiting (None: the store could not be asked).")
    archived: int = Field(description="Entries in the bridge's archive of this source.")
    alerted_last_hour: int = Field(description="Entries handed off in the last hour.")
    trimmed_last_hour: int = Field(default=0, description="Oldest archived entries dropped at `archive_max` "
                                   "in the last hour.")
    summaries_last_hour: SummarySourceCounts = Field(default_factory=SummarySourceCounts)
    redrivable: bool = Field(description="True for list sources (kind sources are retried in their own UI).")


class SinkView(View):
    name: str
    type: str
    health: HealthState
    health_detail: str = ""
    queue_depth: int
    oldest_age_s: float
    undeliverable: int
    group_by: str
    open_groups: int


class TokenDayView(View):
    """One UTC day of model calls, fleet-wide (bridge.stores.trends)."""

    day: str = Field(description="The UTC date, YYYY-MM-DD.")
    calls: int = Field(description="Calls that reached the model (answers from the cache cost none).")
    prompt_tokens: int
    completion_tokens: int
    estimated_calls: int = Field(description="Calls whose reply had no `usage`: counted as characters / 4.")


class GatewayView(View):
    configured: bool
    breaker: BreakerView
    paused_s: float = 0.0
    consecutive_failures: int = 0
    calls_per_minute: int = Field(description="The budget per minute (0: no limit).")
    budget_left: int | None = Field(description="Calls left in the current 60 s window (None: no limit).")
    summaries_last_hour: SummarySourceCounts
    tokens_per_day: list[TokenDayView] = Field(default_factory=list, description="The model's calls and tokens "
                                               "of the last 7 UTC days, today first.")


class GroupSummaryView(View):
    """One open alert group of one grouped sink; (`sink`, `group_key`) identifies it."""

    sink: str
    group_key: str = Field(description="`fp:<fingerprint>`, `queue:<queue>` or `job:<idempotency key>`.")
    title: str = Field(description="The title of the group's first alert (untrusted).")
    severity: Severity
    count: int
    notified: int = Field(description="Jobs covered by notifications sent so far.")
    first_seen: float
    last_seen: float
    queues: dict[str, int] = Field(description="Queue -> jobs of the group from it.")


class GroupMemberView(View):
    idempotency_key: str
    queue: str
    job_id: str
    job_name: str | None = None
    attempts: int | None = None
    last_error: str | None = None
    entry_id: str = Field(description="The entry's id (raw digest), for `entry()`.")
    source: str | None = Field(default=None, description="The entry's source, when known.")
    added_at: float
    notified: bool


class GroupView(GroupSummaryView):
    jobs: list[GroupMemberView]
    jobs_total: int


class RetentionNote(View):
    """A store at (or near) the cap that silently drops its oldest dead letters."""

    store: str = Field(description="What is trimmed: a source's archive, the undeliverable list, a kind's store.")
    count: int
    cap: int
    setting: str = Field(description="The setting that controls the cap.")
    trimmed_last_hour: int | None = Field(default=None, description="Dropped in the last hour, where counted.")
    unit: str = Field(default="jobs", description="What `count` and `cap` measure: `jobs` (the store's size) or "
                      "`seconds` (the age of its oldest job, for a store its job system trims by age).")


class MemoryPlanView(View):
    """What the bridge will keep in Redis at the last hour's rate (docs/operations.md, "Redis memory: planning")."""

    per_second: float = Field(description="Dead letters a second handed off over the last hour.")
    days: int
    projected_bytes: int = Field(description="The memory model's total after `days` at that rate.")
    largest: str = Field(description="The structure that holds the most, and what bounds it.")
    maxmemory_bytes: int = Field(description="Redis's maxmemory (0: no limit).")
    warn: bool = Field(description="The projection passes `share` of maxmemory.")
    share: float


class Overview(View):
    generated_at: float
    sources: list[SourceView]
    groups: list[GroupSummaryView]
    sinks: list[SinkView]
    gateway: GatewayView
    undeliverable: int
    active_silences: int
    read_only: bool = Field(description="True when no console token is configured: actions are refused.")
    retention: list[RetentionNote] = Field(default_factory=list, description="Stores at 90 % of their cap or "
                                           "more: their oldest entries are being (or about to be) dropped.")
    latest: list[EntryView] = Field(default_factory=list, description="The newest archived entries of every "
                                    "source, newest first (what is failing now).")
    memory_plan: MemoryPlanView | None = Field(default=None, description="Redis memory at the current rate; "
                                               "None when Redis's memory could not be read.")


class SummaryView(View):
    title: str
    severity: Severity = Field(description="The summarizer's assessment.")
    likely_cause: str
    next_steps: list[str]
    runbook_hint: str
    runbook: Link | None
    source: SummarySource
    fallback_reason: str | None = None
    repairs: list[str] = Field(default=[], description="Model reply fields the bridge repaired.")


class EnvelopeView(View):
    """The redacted envelope (docs/design.md, section 3): every string untrusted."""

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
    reported_queue: str | None = None
    source_kind: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    trace_id: str | None = Field(default=None, description="The job's trace id, from its validated `traceparent`.")


class SinkDelivery(View):
    """Where the alert went, per routed sink."""

    sink: str
    state: DeliveryState
    at: float | None = Field(default=None, description="When it reached this state (epoch s), if known.")
    detail: str = ""
    group_key: str | None = Field(default=None, description="The group it joined (grouped sinks).")
    silence_id: str | None = None


class EntryView(View):
    id: str = Field(description="The entry's id: the first 16 hex digits of SHA-256 of its raw bytes.")
    source: str
    archived_at: float | None = Field(
        description="When it was handed off (None: an entry archived before the console)."
    )
    severity: Severity | None = Field(description="The routed severity.")
    summary: SummaryView | None
    envelope: EnvelopeView
    deliveries: list[SinkDelivery]
    redrivable: bool
    in_archive: bool = Field(description="False once redriven (or trimmed from the archive).")
    seen_before: str | None = Field(default=None, description=(
        "What the alert said of its cause's history: seen before, how often in 30 days, what happened last time."))


class EntryPage(View):
    source: str
    offset: int
    limit: int
    total: int = Field(description="Entries in the archive.")
    entries: list[EntryView]
    next_offset: int | None


class UndeliverableView(View):
    id: str = Field(description="Stable id of the record (hash of its stored form).")
    sink: str
    sink_type: str | None = None
    status: int | None = None
    error: str
    idempotency_key: str | None = None
    attempts: int | None = None
    at: float | None = None
    queue: str | None = None
    job_id: str | None = None
    source_key: str | None = None
    raw_digest: str | None = None
    group_key: str | None = None
    count: int | None = None
    retryable: bool = Field(description="True when the record holds the whole alert (it can be sent again).")


class SilenceMatchers(View):
    """0.2.0's matcher fields (kept for API clients): set when the silence says exactly that."""

    queue: str | None = Field(default=None, description="Glob on the route's queue (`payments*`).")
    job_name: str | None = Field(default=None, description="Exact job name.")
    fingerprint: str | None = Field(default=None, description="Exact fingerprint.")


class SilenceComment(View):
    author: str
    at: float
    text: str


class SilenceView(View):
    id: str
    matchers: SilenceMatchers
    label_matchers: list[Matcher] = Field(description="Every matcher (name, op, value); all must match.")
    starts_at: float
    ends_at: float
    reason: str = Field(description="The comment given when it was made (Alertmanager's `comment`).")
    author: str = Field(description="Who made it (Alertmanager's `createdBy`).")
    webhooks: bool = Field(description="True: webhooks are silenced too (default: they still get the alert).")
    active: bool
    state: Literal["pending", "active", "expired"]
    expired_by: str | None = None
    updated_by: str | None = None
    replaces: str | None = Field(default=None, description="The silence it replaced (its matchers were edited).")
    replaced_by: str | None = Field(default=None, description="The silence that replaced it.")
    comments: list[SilenceComment] = Field(default_factory=list)


class ActionResult(View):
    ok: bool
    action: str
    message: str
    count: int = 0


class SilenceCreate(BaseModel):
    """A new silence: `label_matchers` (or 0.2.0's fields); it ends at `ends_at` (epoch s) or after `duration_s`."""

    model_config = ConfigDict(extra="forbid")

    label_matchers: list[Matcher] | None = Field(default=None, max_length=MATCHERS_MAX,
                                                 description="Matchers, all of which must match.")
    queue: str | None = Field(default=None, max_length=512, description="Glob on the route's queue.")
    job_name: str | None = Field(default=None, max_length=512, description="Exact job name.")
    fingerprint: str | None = Field(default=None, max_length=128, description="Exact fingerprint.")
    ends_at: float | None = Field(default=None, description="When it ends (epoch seconds).")
    duration_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600, description="Or: how long it lasts.")
    reason: str = Field(default="", max_length=1000, description="Why (Alertmanager's `comment`).")
    author: str | None = Field(default=None, max_length=200, description="Who (else the X-Console-User header).")
    webhooks: bool = Field(default=False, description="True: silence webhook sinks too.")


class ActionBody(BaseModel):
    """Optional body of an action: who did it (else the X-Console-User header, else `token`)."""

    model_config = ConfigDict(extra="forbid")

    author: str | None = Field(default=None, max_length=200)


class RedriveBody(ActionBody):
    """A redrive's optional body: who, and why (`note`, as `dlq-bridge redrive --note`: kept with the
    cause's history and shown on its next alert, bridge.core.seen_before)."""

    note: str = Field(default="", max_length=1000, description="Why now (one line of 200 characters kept).")
