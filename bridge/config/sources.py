"""`[sources]`: how the `dead_letter:*` lists are drained.

The `[[sources.<kind>]]` arrays are added from the kind registry (bridge/settings.py).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from bridge.config.section import Section


class ListSourcesSettings(Section):
    """`[sources]` without the kind arrays: bridge/settings.py adds one per kind of bridge/sources/kind_registry.py."""

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
        description="Deaths (or stalls) of its consumer while the entry ran alone; on the next claim it moves, "
        "unparsed, to `dlq_bridge:quarantine:<ref>` with a static alert. Deaths while it was one of several "
        "held make it a suspect only.",
    )
    entry_deadline_s: float = Field(
        default=30.0,
        gt=0,
        description="Deadline of one entry's intake (normalize, redact, fingerprint), measured on a thread; "
        "past it the entry is quarantined.",
    )

    @model_validator(mode="after")
    def _heartbeat_outlives_interval(self) -> ListSourcesSettings:
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ValueError("sources.heartbeat_ttl_s must be longer than heartbeat_interval_s")
        return self
