"""The source port: the `dead_letter:*` lists and every other kind behind one interface.

Like saq's `Queue`, `Source` does the bookkeeping in its public methods and leaves small parts to
each plug-in (docs/design.md, sections 2, 2b and 3b):

- `claim_batch(limit)`: the plug-in's `_claim` takes up to `limit` entries into this consumer's
  in-flight list (a list DLQ: atomically, LMOVE into `dlq_bridge:processing:<ref>:<consumer>`; a
  kind: its record is leased or delivered, then its raw bytes are pushed to
  `dlq_bridge:inflight:<ref>:<consumer>`); then the port reads each entry's suspect mark and its
  solo deaths (`bridge.stores.claims`) in one MGET;
- the drain hands the entry off (`bridge.stores.handoff`: one batched script archives or quarantines it
  out of the in-flight list and queues its alert), and only then calls `acknowledge`: nothing to do
  for a list (the hand-off moved it), the receipt acknowledged at its source for a kind (`_ack`);
- `recover_own` / `reap`: a dead consumer's in-flight lists go back (`_give_back`: a list's entries
  to its DLQ; a kind's dropped, the record returns through its own lease or redelivery), and the
  death is counted against the suspect it ran alone, if any (`return_held`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as redis

from bridge.core.claimed import Claimed, entry_digest
from bridge.stores.claims import ClaimStore

log = logging.getLogger(__name__)

Forward = Callable[[str, Any], Awaitable[None]]  # (outbox, parcel): `HandOff.forward_parcel`




class AckNote(Protocol):
    """What a watched source keeps with an acknowledged job (`bridge.sources.leaving.LeaveNote`)."""

    def encode(self) -> str: ...


@dataclass(frozen=True)
class Held:
    """One in-flight list: whose it is, its key and the source key its entries belong to."""

    consumer: str
    key: str
    source_key: str


class SourceUnavailable(Exception):
    """The source cannot be read now (`reason`: the error's class and kind, never its text)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Source(ABC):
    """The port every source implements (see module doc); `name` is unique among the sources."""

    name: str = "lists"
    health_check: str | None = None  # a `/healthz` check `source:<name>` for a source that can be unreadable
    leave_check_s: float | None = None  # watched kinds: how often `check_leaving` runs

    def __init__(
        self, client: redis.Redis, consumer: str, heartbeat_ttl_s: int = 30, archive_max: int = 1000,
        *, announce: Mapping[str, object] | None = None,
    ) -> None:
        self._redis = client
        self.consumer = consumer
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.archive_max = archive_max
        self._claims = ClaimStore(client, announce)  # `announce`: the release and formats in the heartbeat

    # --- the plug-in's parts ---------------------------------------------------------------
    @abstractmethod
    async def _claim(self, limit: int) -> list[Claimed]:
        """Up to `limit` entries put into our in-flight list, with their marks (`_marked`)."""

    @abstractmethod
    def _inflight_key(self, source_key: str) -> str:
        """This consumer's in-flight list for entries of `source_key`."""

    @abstractmethod
    def _held_lists(self) -> AsyncIterator[Held]:
        """Every in-flight list of this source, of any consumer."""

    @abstractmethod
    async def _give_back(self, held: Held) -> list[bytes]:
        """Empty `held` (its consumer is gone); the raw entries it held."""

    @abstractmethod
    async def _release(self, source_key: str, raw: bytes) -> bool:
        """Take one entry out of our in-flight list, back to where it came from."""

    async def _ack(self, claimed: Claimed, note: AckNote | None) -> bool:
        """Acknowledge `claimed` at its source (after its hand-off); lists have nothing to do."""
        return True

    @abstractmethod
    async def depths(self) -> dict[str, int]:
        """What waits, per DLQ (lists) or per source (kinds)."""

    # --- the bookkeeping, the same for every source -----------------------------------------
    async def claim_batch(self, limit: int) -> list[Claimed]:
        """Up to `limit` entries moved into our in-flight list; empty (after a short wait) when idle."""
        return await self._claim(limit)

    async def claim(self) -> Claimed | None:
        batch = await self.claim_batch(1)
        return batch[0] if batch else None

    async def acknowledge(self, claimed: Claimed, note: AckNote | None = None) -> bool:
        """After the hand-off only: the entry is archived or quarantined, its alert in the outbox."""
        if claimed.receipt is None:
            return True
        return await self._ack(claimed, note)

    async def finish(self, claimed: Claimed) -> bool:
        """Archive the entry without an alert (it failed in the drain, and was recorded), then
        acknowledge it; False when it was no longer in our in-flight list (reaped)."""
        source = claimed.source_key
        inflight = claimed.inflight or self._inflight_key(source)
        done = await self._claims.finish(inflight, source, claimed.raw, claimed.digest, self.archive_max)
        if done:
            await self.acknowledge(claimed)
        return done

    async def _marked(self, source_key: str, raws: list[bytes]) -> list[tuple[int, bool]]:
        """(solo deaths, suspect) per entry: one MGET of their claim counters (the source's slot)."""
        return await self._claims.marks(source_key, [entry_digest(raw) for raw in raws])

    async def held_lists(self) -> list[Held]:
        return [held async for held in self._held_lists()]

    async def give_back(self, held: Held) -> list[bytes]:
        return await self._give_back(held)

    async def release(self, source_key: str, raw: bytes) -> bool:
        """Return one orphaned claim (no worker holds it) from our in-flight list."""
        return await self._release(source_key, raw)

    async def own_entries(self) -> Counter[tuple[str, bytes]]:
        """Everything in this consumer's in-flight lists, as (source key, raw) counts."""
        found: Counter[tuple[str, bytes]] = Counter()
        async for held in self._own_lists():
            for raw in await self._claims.entries(held.key):
                found[(held.source_key, raw)] += 1
        return found

    async def _own_lists(self) -> AsyncIterator[Held]:
        """This consumer's in-flight lists (a plug-in may ask Redis for fewer keys)."""
        async for held in self._held_lists():
            if held.consumer == self.consumer:
                yield held

    async def recover_own(self) -> int:
        """Give back this consumer's in-flight entries (a previous run died), counting the death."""
        return await recover_own([self])

    async def reap(self) -> int:
        """Give back the in-flight entries of consumers whose heartbeat expired."""
        return await reap_dead([self])

    async def run_alone(self, claimed: Claimed) -> None:
        """Note the suspect this consumer runs alone: a death before `ran_alone` is held against it."""
        await self._claims.note_solo(self.consumer, claimed.digest, claimed.source_key)

    async def ran_alone(self) -> None:
        await self._claims.drop_solo(self.consumer)

    async def heartbeat(self) -> None:
        await self._claims.beat(self.consumer, self.heartbeat_ttl_s)

    async def drop_heartbeat(self) -> None:
        await self._claims.drop_heartbeat(self.consumer)

    async def rescan(self) -> list[str]:
        return []

    def waiting(self) -> int:
        """Non-empty DLQs not served right now (over `max_sources`), waiting for their turn."""
        return 0

    async def drained(self) -> bool:
        """Burst mode: nothing left to claim (an empty claim said so for a kind)."""
        return True

    async def check_leaving(self, forward: Forward) -> Counter[str]:
        """Watched kinds: resolves queued for alerted jobs that left the store by hand, by reason."""
        return Counter()

    async def close(self) -> None:
        return None


# --- deaths (docs/design.md, section 3b): one reaper for every source of a consumer ----------------


async def recover_own(sources: Sequence[Source]) -> int:
    """Give back everything this consumer holds in any source (its previous run died)."""
    store, consumer = sources[0]._claims, sources[0].consumer
    held = [(source, h) for source in sources for h in await source.held_lists() if h.consumer == consumer]
    return await return_held(store, consumer, held)


async def reap_dead(sources: Sequence[Source]) -> int:
    """Give back what consumers whose heartbeat expired (even never-seen ids) held in any source."""
    store, consumer = sources[0]._claims, sources[0].consumer
    by_consumer: dict[str, list[tuple[Source, Held]]] = {}
    for source in sources:
        for held in await source.held_lists():
            if held.consumer != consumer:
                by_consumer.setdefault(held.consumer, []).append((source, held))
    moved = 0
    for dead, lists in by_consumer.items():
        if not await store.alive(dead):
            count = await return_held(store, dead, lists)
            if count:
                log.warning("reaped %d entries of dead consumer %s", count, dead)
            moved += count
    return moved


async def return_held(store: ClaimStore, consumer: str, lists: Sequence[tuple[Source, Held]]) -> int:
    """Give back a dead (or stalled) consumer's in-flight lists, each entry marked a suspect.

    The death is held against one entry at most (its suspect counter, `dlq_bridge:claims:<ref>:<digest>`,
    goes up by one): the suspect the consumer noted it ran alone (its solo note), else the only entry it
    held in any source. Every other entry was a bystander: it is a suspect now, its count unchanged,
    and runs alone next time. The drain quarantines an entry once its count reaches
    `sources.quarantine_after`. A crash between the give-back and the marks leaves them unmarked (an
    under-count), never an entry lost.
    """
    alone = await store.take_solo(consumer)
    returned: dict[str, list[bytes]] = {}
    for source, held in lists:
        returned.setdefault(held.source_key, []).extend(await source.give_back(held))
    total = sum(len(raws) for raws in returned.values())
    convicted = _convicted(alone, returned, total)
    for source_key, raws in returned.items():
        deaths = [(entry_digest(raw), 1 if (source_key, raw) == convicted else 0) for raw in raws]
        await store.count_deaths(source_key, deaths)
    return total


def _convicted(
    alone: tuple[str, str] | None, returned: dict[str, list[bytes]], total: int
) -> tuple[str, bytes] | None:
    """The entry a death is held against: the noted solo suspect if it was still held, else a lone entry."""
    if alone is not None:
        digest, source_key = alone
        for raw in returned.get(source_key, []):
            if entry_digest(raw) == digest:
                return source_key, raw
    if total == 1:
        source_key, raws = next((s, r) for s, r in returned.items() if r)
        return source_key, raws[0]
    return None
