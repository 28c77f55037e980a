"""Record formats: what one release writes to Redis so that the release beside it can read it.

Old and new replicas share one Redis during a rolling upgrade (docs/operations.md, "Upgrades").
Every JSON record the bridge writes for another process to read (a queued alert or resolve, a
hand-off parcel, a group's first alert, an entry record, an undeliverable record, a cached summary,
a silence, an audit record, a bulk action) is written in one *record format*:

- format 1: what 0.1.0 wrote and reads. It carries no number (0.1.0 forbids unknown fields in a
  summary and a cached summary), and a summary carries no `repairs`.
- format 2 (0.2.0): the same records with their number first, `{"v":2,…}`, and a summary's
  `repairs`. Readers of format 2 ignore fields they do not know, so the next format can add fields.
  The release after 0.2.0 adds an alert's `seen_before` to format 2 (0.2.0 ignores it; an alert
  0.2.0 wrote reads as one without history); format 1 records leave it out.

A replica reads every format up to `reads` and writes `writes`: the newest format that every live
replica reads (its heartbeat says which; one that says nothing reads format 1), never newer than its
own. A record of a newer format is never dropped: it is left for a replica that reads it
(`NewerFormat`), counted, and reported by `/healthz` and `check`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic.main import IncEx

from bridge.core.models import Alert

READS = 2
"""The newest record format this release reads and, with every live replica reading it, writes."""

FIRST = 1
"""The format a record without a number has, and a replica that announces none reads."""

TEST_POSE_ENV = "DLQ_BRIDGE_TEST_POSE_AS_NEXT_RELEASE"
"""Test-only: a replica with this set to 1 poses as the next release (it reads and writes format
`READS + 1`, identical to `READS` but for its number), so the compatibility test can roll a release
back onto this one (tests/compat/)."""

_STAMP_RE = re.compile(r'^\{"v":(\d{1,4})(,|\})')
_REPAIRS: IncEx = {"repairs"}
_NOT_FOR_FORMAT_1: IncEx = {"summary": _REPAIRS, "seen_before": True}


class NewerFormat(ValueError):
    """A record of a format newer than this replica reads: leave it for a replica that reads it."""

    def __init__(self, found: int, reads: int) -> None:
        super().__init__(f"record format {found} is newer than this replica reads ({reads})")
        self.found = found


def format_of(text: str) -> int:
    """The record format of a JSON record: its leading `"v"`, else format 1."""
    match = _STAMP_RE.match(text)
    return int(match.group(1)) if match else FIRST


def stamp(text: str, fmt: int) -> str:
    """`text` (a JSON object) as a record of format `fmt`: its number first, none for format 1."""
    if fmt <= FIRST or not text.startswith("{"):
        return text
    rest = text[1:]
    return f'{{"v":{fmt}' + ("," + rest if rest != "}" else "}")


def unstamp(text: str) -> str:
    """The record without its number (for readers that check the fields they are given)."""
    match = _STAMP_RE.match(text)
    if not match:
        return text
    return "{}" if match.group(2) == "}" else "{" + text[match.end():]


@dataclass
class RecordFormat:
    """The formats this replica reads and writes now (`writes` follows the fleet, see module doc)."""

    reads: int = READS
    writes: int = READS
    newer_waiting: dict[str, int] = field(default_factory=dict)
    """Items of a newer format this replica left, by where they wait (a sink's queue, a group…)."""

    @classmethod
    def of_release(cls, pose_as_next: bool = False) -> RecordFormat:
        reads = READS + 1 if pose_as_next else READS
        return cls(reads=reads, writes=reads)

    def follow(self, fleet_reads: list[int]) -> int:
        """Write what every live replica reads (this one included); returns the format now written."""
        self.writes = min([self.reads, *fleet_reads])
        return self.writes

    def check(self, text: str) -> None:
        """Raise `NewerFormat` for a record this replica must leave to a newer one."""
        found = format_of(text)
        if found > self.reads:
            raise NewerFormat(found, self.reads)

    def write(self, text: str) -> str:
        """A JSON record in the format written now."""
        return stamp(text, self.writes)

    def alert_json(self, alert: Alert) -> str:
        """The alert as a record of the format written now (format 1: no `repairs`, no number)."""
        if self.writes <= FIRST:
            return alert.model_dump_json(exclude=_NOT_FOR_FORMAT_1)
        return stamp(alert.model_dump_json(), self.writes)

    def alert_dict(self, alert: Alert) -> dict[str, object]:
        """The alert as a JSON-ready dict of the format written now (inside another record)."""
        if self.writes <= FIRST:
            return alert.model_dump(mode="json", exclude=_NOT_FOR_FORMAT_1)
        return alert.model_dump(mode="json")
