"""`[sources]`: how the `dead_letter:*` lists are drained, and the `[[sources.<kind>]]` tables."""

from __future__ import annotations

from pydantic import Field, model_validator

from bridge.config.base import Section
from bridge.sources.config import (
    BullMQSourceSettings,
    KindSources,
    RabbitMQSourceSettings,
    RedisStreamSourceSettings,
    RQSourceSettings,
    SidekiqSourceSettings,
    SqsSourceSettings,
    duplicate_source_name,
)


class SourcesSettings(Section):
    match: str = Field(default="dead_letter:*", description="SCAN pattern of the DLQ lists (never KEYS).")
    archive_max: int = Field(
        default=10_000, ge=1, description="Finished entries kept per DLQ in `dlq_bridge:alerted:<ref>`."
    )
    concurrency: int = Field(default=32, ge=1, le=1024, description="Entries processed at once.")
    rescan_interval_s: float = Field(
        default=2.0, gt=0, description="How often new DLQs are discovered by SCAN (raise it for huge keyspaces)."
    )
    poll_interval_s: float = Field(default=0.05, gt=0, description="Blocking wait per DLQ while all are empty.")
    heartbeat_interval_s: float = Field(
        default=10.0, gt=0, description="How often the consumer heartbeat is refreshed."
    )
    heartbeat_ttl_s: int = Field(
        default=30, ge=2, description="Heartbeat lifetime; after it, other consumers reap the processing list."
    )
    reap_interval_s: float = Field(
        default=15.0, gt=0, description="How often processing lists of dead consumers are returned."
    )
    excerpt_max_bytes: int = Field(default=2048, ge=64, description="Largest payload excerpt kept in an envelope.")
    max_parse_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Entries larger than this are not parsed: an excerpt and an *oversized dead letter* alert.",
    )
    max_sources: int = Field(
        default=1000,
        ge=1,
        description="DLQs served at once; more non-empty ones wait for their turn (shown in `/healthz` and "
        "`dlq_bridge_sources_waiting`), none is dropped.",
    )
    sticky_s: float = Field(
        default=600.0,
        ge=0,
        description="How long a drained DLQ stays tracked (and keeps its depth series) after it was last seen.",
    )
    quarantine_after: int = Field(
        default=3,
        ge=1,
        description="Claims an entry may die or time out in; on the next claim it moves, unparsed, to "
        "`dlq_bridge:quarantine:<ref>` with a static alert.",
    )
    entry_deadline_s: float = Field(
        default=30.0,
        gt=0,
        description="Deadline of one entry's intake (normalize, redact, fingerprint), measured on a thread; "
        "past it the entry is quarantined.",
    )

    sidekiq: list[SidekiqSourceSettings] = Field(
        default_factory=list, description="`[[sources.sidekiq]]`: Sidekiq dead sets, watched (see docs/sources.md)."
    )
    bullmq: list[BullMQSourceSettings] = Field(
        default_factory=list, description="`[[sources.bullmq]]`: BullMQ failed sets, watched (see docs/sources.md)."
    )
    rq: list[RQSourceSettings] = Field(
        default_factory=list, description="`[[sources.rq]]`: RQ failed registries, watched (see docs/sources.md)."
    )
    redis_stream: list[RedisStreamSourceSettings] = Field(
        default_factory=list,
        description="`[[sources.redis_stream]]`: dead-letter streams, consumed (see docs/sources.md).",
    )
    rabbitmq: list[RabbitMQSourceSettings] = Field(
        default_factory=list,
        description="`[[sources.rabbitmq]]`: queues bound to a dead-letter exchange, consumed (see docs/sources.md).",
    )
    sqs: list[SqsSourceSettings] = Field(
        default_factory=list, description="`[[sources.sqs]]`: SQS dead-letter queues, consumed (see docs/sources.md)."
    )

    def kinds(self) -> KindSources:
        """The configured kind sources (names checked unique)."""
        return KindSources(
            sidekiq=self.sidekiq,
            bullmq=self.bullmq,
            rq=self.rq,
            redis_stream=self.redis_stream,
            rabbitmq=self.rabbitmq,
            sqs=self.sqs,
        )

    @model_validator(mode="after")
    def _unique_kind_names(self) -> SourcesSettings:
        problem = duplicate_source_name(
            [*self.sidekiq, *self.bullmq, *self.rq, *self.redis_stream, *self.rabbitmq, *self.sqs]
        )
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _heartbeat_outlives_interval(self) -> SourcesSettings:
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ValueError("sources.heartbeat_ttl_s must be longer than heartbeat_interval_s")
        return self
