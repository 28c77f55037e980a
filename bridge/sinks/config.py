"""The keys every `[[sinks]]` table has; each sink type's own table subclasses `SinkSettingsBase`."""

from __future__ import annotations

import fnmatch
from typing import Literal

from pydantic import Field

from bridge.config.base import NAME_RE, Section
from bridge.models import Severity

GroupBy = Literal["fingerprint", "queue", "none"]


class SinkSettingsBase(Section):
    """One `[[sinks]]` table; a sink type's subclass narrows `type` to its `Literal` name."""

    type: str = Field(description="Sink type.")
    name: str = Field(pattern=NAME_RE, description="Unique sink name (metrics labels, ledger keys).")
    min_severity: Severity = Field(default=Severity.INFO, description="Lowest severity this sink receives.")
    queues: list[str] = Field(default_factory=list, description="Queue globs this sink receives (empty: all).")
    group_by: GroupBy = Field(
        default="none",
        description=(
            "How alerts are grouped into one notification: `fingerprint` (one per cause), "
            "`queue`, or `none` (one notification per job)"
        ),
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

    def _owner(self) -> str:
        return f"sink {self.name}: "

    def routes(self, queue: str, severity: Severity) -> bool:
        """True when this sink wants alerts of `severity` from `queue`."""
        if not severity.at_least(self.min_severity):
            return False
        return not self.queues or any(fnmatch.fnmatchcase(queue, p) for p in self.queues)
