"""The keys every `[[sinks]]` table has; each sink type's own table subclasses `SinkSettingsBase`."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from bridge.config.secrets import RequiredSecret, secret_env, secret_file
from bridge.config.section import NAME_RE, Section, check_http_url
from bridge.core.models import Severity

GroupBy = Literal["cause", "fingerprint", "queue", "none"]


class SinkSettingsBase(Section):
    """One `[[sinks]]` table; a sink type's subclass narrows `type` to its `Literal` name."""

    type: str = Field(description="Sink type.")
    name: str = Field(pattern=NAME_RE, description="Unique sink name (metrics labels, ledger keys).")
    min_severity: Severity = Field(default=Severity.INFO, description="Lowest severity this sink receives.")
    queues: list[str] = Field(default_factory=list, description="Queue globs this sink receives (empty: all).")
    group_by: GroupBy = Field(
        default="none",
        description=(
            "How alerts are grouped into one notification: `cause` (one per cause and routed severity, "
            "across queues and kinds), `fingerprint` (one per failure of one DLQ), `queue`, or `none` "
            "(one notification per job)"
        ),
    )
    outage_min_queues: int = Field(
        default=3, ge=2, description="A cause group over this many queues is shown as an outage"
    )
    group_wait_s: float = Field(
        default=10.0, ge=0, description="Wait after a group's first job before its first notification"
    )
    group_interval_s: float = Field(
        default=60.0, gt=0, description="Least time between two notifications of a growing group"
    )
    repeat_interval_s: float = Field(
        default=14400.0,
        gt=0,
        description="A group with no new jobs this long after its last notification is re-sent once, then closed",
    )

    group_members_max: int = Field(
        default=200, ge=20,
        description="Jobs an open group keeps by name (its samples, the jobs a notification still has to list, "
        "the jobs a resolve must match); older ones are counted, not kept, so a failure that never stops "
        "holds a fixed size in Redis (docs/design.md, section 5b)",
    )

    def _owner(self) -> str:
        return f"sink {self.name}: "

    def routes(self, queue: str, severity: Severity) -> bool:
        """True when this sink wants alerts of `severity` from `queue`."""
        if not severity.at_least(self.min_severity):
            return False
        return not self.queues or any(fnmatch.fnmatchcase(queue, p) for p in self.queues)


class ChatWebhookSettings(SinkSettingsBase):
    """A chat webhook (Slack, Teams): its URL is a secret, its posts are paced, alerts grouped by cause."""

    url: RequiredSecret = Field(default=None, description="Webhook URL, a secret: prefer `url_env` or `url_file`.")
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    group_by: GroupBy = Field(
        default="fingerprint", description="How alerts are grouped: `cause`, `fingerprint`, `queue` or `none`"
    )

    @model_validator(mode="after")
    def _url_shape(self) -> ChatWebhookSettings:
        if self.url is not None:
            check_http_url(self.url.get_secret_value(), f"sink {self.name}: webhook url")
        return self

    def webhook_url(self) -> str:
        assert self.url is not None
        return self.url.get_secret_value()
