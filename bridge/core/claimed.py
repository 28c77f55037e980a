"""A claimed entry: what flows from a source through the drain to the hand-off (docs/design.md, 2 and 3b)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field


def entry_digest(raw: bytes) -> str:
    """`<digest>`: the first 16 hex digits of SHA-256 of the raw entry (docs/design.md, section 2)."""
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Receipt:
    """Opaque to everyone but the source that issued it."""

    source: str
    token: str


@dataclass(frozen=True)
class Claimed:
    """One entry taken from a source into this consumer's in-flight list.

    `source_key` is byte-exact (`bridge.core.names.decode`): the DLQ key of a list entry, the source's
    configured name for a kind record (its bridge keys are filed under it). `suspect`: a consumer
    died (or stalled) while holding this entry, so it runs alone (`bridge.drain.solo`); `claims` counts
    the deaths while it ran alone, the only deaths held against an entry (docs/design.md, 3b).
    `queue` is the route's queue when the source knows it (kinds; None: from the DLQ key),
    `origin` where a kind record came from (`sidekiq:dead`), `receipt` its opaque receipt, and
    `inflight` the in-flight list holding it (empty: the list's processing key). The raw bytes
    of a record are the same on every delivery: deaths are tracked by their digest.
    """

    source_key: str
    raw: bytes
    claimed_at: float = field(default=0.0, compare=False)
    claims: int = field(default=0, compare=False)
    suspect: bool = field(default=False, compare=False)
    queue: str | None = field(default=None, compare=False)
    receipt: Receipt | None = field(default=None, compare=False)
    origin: str | None = field(default=None, compare=False)
    inflight: str = field(default="", compare=False)
    attempts: int | None = field(default=None, compare=False)  # a kind's, when the raw names none

    @functools.cached_property
    def digest(self) -> str:
        return entry_digest(self.raw)
