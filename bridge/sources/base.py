"""The interface every dead-letter source implements."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol


def entry_digest(raw: bytes) -> str:
    """`<digest>`: the first 16 hex digits of SHA-256 of the raw entry (docs/design.md, section 2)."""
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Claimed:
    """One entry taken from a DLQ into this consumer's processing list.

    `source_key` is byte-exact (`bridge.keys.decode`). `suspect`: a consumer died
    (or stalled) while holding this entry, so it runs alone (`bridge.solo`); `claims`
    counts the deaths while it ran alone, the only deaths held against an entry
    (docs/design.md, section 3b). Identical entries claimed side by side do not count
    against each other.
    """

    source_key: str
    raw: bytes
    claimed_at: float = field(default=0.0, compare=False)
    claims: int = field(default=0, compare=False)
    suspect: bool = field(default=False, compare=False)

    @functools.cached_property
    def digest(self) -> str:
        return entry_digest(self.raw)


class Source(Protocol):
    async def claim(self) -> Claimed | None:
        """Atomically move the next entry into processing; None when all are empty."""
        ...

    async def claim_batch(self, limit: int) -> list[Claimed]:
        """Up to `limit` entries moved into processing in one step; empty when all are empty."""
        ...

    async def finish(self, claimed: Claimed) -> bool:
        """Atomically move the entry from processing to the archive."""
        ...

    async def recover_own(self) -> int:
        """Return this consumer's processing entries to their DLQs (at start)."""
        ...

    async def reap(self) -> int:
        """Return the processing entries of consumers whose heartbeat expired."""
        ...

    async def own_entries(self) -> Counter[tuple[str, bytes]]:
        """Everything in this consumer's processing lists, as (source key, raw) counts."""
        ...

    async def release(self, source_key: str, raw: bytes) -> bool:
        """Atomically return one claimed entry to its DLQ (an orphaned claim)."""
        ...

    async def run_alone(self, claimed: Claimed) -> None:
        """Note that `claimed` runs alone now: a death before `ran_alone` is held against it."""
        ...

    async def ran_alone(self) -> None: ...

    async def heartbeat(self) -> None: ...

    async def drop_heartbeat(self) -> None: ...

    async def rescan(self) -> list[str]: ...

    async def depths(self) -> dict[str, int]: ...

    def waiting(self) -> int:
        """Non-empty DLQs not served right now (over `max_sources`), waiting for their turn."""
        ...
