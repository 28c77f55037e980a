"""The overview's "Failing now": the newest entries grouped by cause (their fingerprint), one row each.

Five failures of one job with one error are one row with a count of 5, named by its title, its
queues and when it was first and last seen among the newest entries, so two causes with the same
title are told apart (their queues, times and the fingerprint differ).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bridge.console.views import EntryView
from bridge.core.models import Severity

RANK: dict[str, int] = {"critical": 3, "error": 2, "warning": 1, "info": 0}


@dataclass
class Cause:
    """One cause among the newest entries; `newest` is the entry the row links to."""

    fingerprint: str
    newest: EntryView
    count: int = 0
    queues: Counter[str] = field(default_factory=Counter)
    first_seen: float | None = None
    last_seen: float | None = None
    severity: Severity | None = None

    @property
    def title(self) -> str:
        e = self.newest
        return e.summary.title if e.summary else (e.envelope.job_name or e.envelope.job_id)

    def add(self, entry: EntryView) -> None:
        self.count += 1
        self.queues[entry.envelope.queue] += 1
        at = entry.archived_at
        if at is not None:
            self.first_seen = at if self.first_seen is None else min(self.first_seen, at)
            self.last_seen = at if self.last_seen is None else max(self.last_seen, at)
        if entry.severity and RANK[entry.severity] > RANK.get(self.severity or "", -1):
            self.severity = entry.severity


def causes(entries: Sequence[EntryView]) -> list[Cause]:
    """`entries` (newest first) grouped by fingerprint (an entry without one is its own cause), newest first."""
    found: dict[str, Cause] = {}
    for entry in entries:
        key = entry.envelope.fingerprint or f"entry:{entry.source}:{entry.id}"
        cause = found.get(key)
        if cause is None:
            cause = found[key] = Cause(fingerprint=entry.envelope.fingerprint, newest=entry)
        cause.add(entry)
    return list(found.values())
