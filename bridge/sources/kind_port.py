"""A kind reader behind the source port (docs/design.md, section 2b).

A reader (`bridge.sources.kinds.KindReader`: Sidekiq, BullMQ, RQ, Redis Streams, RabbitMQ, SQS)
claims one record at a time with an opaque receipt and acknowledges it. `KindPort` gives it the
port's guarantees, the same as a list's:

- a claim pushes the record's raw bytes to this consumer's in-flight list,
  `dlq_bridge:inflight:{<source name>}:<consumer>`, and reads its suspect mark and solo deaths;
- the drain hands it off with the one batched script (archive or quarantine out of that list,
  alert to the outbox), and only then is the record acknowledged at its source (the watched
  cursor advanced, XACK, basic.ack, DeleteMessage);
- a consumer that dies holding records: its in-flight list is dropped and the death counted
  (`bridge.sources.source.return_held`); the records come back through the reader's own lease or
  redelivery, as suspects, and run alone.

A source that cannot be read (its broker down, refused, bad credentials) raises
`SourceUnavailable` with a short reason: the error's class and kind, never its text (which may
hold a URL).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence

import redis.asyncio as redis

from bridge.core.claimed import Claimed
from bridge.sources.kinds import KindReader, KindRecord
from bridge.sources.source import AckNote, Forward, Held, Source, SourceUnavailable
from bridge.sources.watched import WatchedSource
from bridge.stores.claims import inflight_key

log = logging.getLogger(__name__)

IDLE_PAUSE_S = (0.05, 1.0)  # an empty source is asked again after this, doubling while it stays empty


class KindPort(Source):
    """One configured kind source (see module doc); `reader` does the kind's own part."""

    def __init__(
        self, reader: KindReader, client: redis.Redis, consumer: str, *, heartbeat_ttl_s: int, archive_max: int
    ) -> None:
        super().__init__(client, consumer, heartbeat_ttl_s, archive_max)
        self.reader = reader
        self.name = reader.name
        self.health_check = f"source:{reader.name}"
        self.leave_check_s = reader.leave_check_s if isinstance(reader, WatchedSource) else None
        self._inflight = inflight_key(self.name, consumer)
        self._idle = IDLE_PAUSE_S[0]
        self._last_depth: int | None = None

    async def _claim(self, limit: int) -> list[Claimed]:
        records = await self._take(limit)
        if not records:
            await asyncio.sleep(self._idle)  # SQS bills each receive: an idle source is asked less often
            self._idle = min(self._idle * 2, IDLE_PAUSE_S[1])
            return []
        self._idle = IDLE_PAUSE_S[0]
        raws = [record.raw for record in records]
        await self._claims.push_inflight(self._inflight, raws)
        marks = await self._marked(self.name, raws)
        claimed_at = time.monotonic()
        return [
            Claimed(self.name, r.raw, claimed_at, n, suspect, r.queue, r.receipt, r.source_key, self._inflight,
                    r.attempts)
            for r, (n, suspect) in zip(records, marks, strict=True)
        ]

    async def _take(self, limit: int) -> list[KindRecord]:
        """Up to `limit` records from the reader, one claim each; `SourceUnavailable` when it fails at once."""
        records: list[KindRecord] = []
        try:
            while len(records) < limit:
                record = await self.reader.claim()
                if record is None:
                    break
                records.append(record)
        except Exception as exc:  # any client library: the drain waits it out, never crashes
            if not records:
                raise SourceUnavailable(why_unreadable(exc)) from exc
            log.warning("source %s failed after %d records (%s)", self.name, len(records), why_unreadable(exc))
        return records

    async def _ack(self, claimed: Claimed, note: AckNote | None) -> bool:
        """A failed ack leaves the record to its lease or redelivery (the delivery ledger dedupes)."""
        assert claimed.receipt is not None
        try:
            if isinstance(self.reader, WatchedSource):
                acked = await self.reader.ack_held(claimed.receipt, note)
            else:
                acked = await self.reader.ack(claimed.receipt)
        except Exception as exc:
            log.warning("acknowledging a record of %s failed (%s); it will come back", self.name, type(exc).__name__)
            return False
        if not acked:
            log.info("a record of %s was no longer ours when acknowledged", self.name)
        return acked

    def _inflight_key(self, source_key: str) -> str:
        return self._inflight

    async def _held_lists(self) -> AsyncIterator[Held]:
        async for key, consumer in self._claims.inflight_lists(self.name):
            yield Held(consumer, key, self.name)

    async def _give_back(self, held: Held) -> list[bytes]:
        """Drop the list: each record comes back through the reader's own lease or redelivery."""
        return await self._claims.drop_inflight(held.key)

    async def _release(self, source_key: str, raw: bytes) -> bool:
        return await self._claims.remove_inflight(self._inflight, raw)

    async def rescan(self) -> list[str]:
        try:
            return await self.reader.rescan()
        except Exception as exc:  # its store is down: the claims say so on /healthz
            log.warning("rescan of source %s failed (%s)", self.name, why_unreadable(exc))
            return []

    async def depths(self) -> dict[str, int]:
        """Records not yet finished (watched) or waiting (consumable); the last value when it cannot answer."""
        try:
            self._last_depth = await self.reader.depth()
        except Exception as exc:
            log.warning("depth of source %s unavailable (%s)", self.name, type(exc).__name__)
        return {} if self._last_depth is None else {self.name: self._last_depth}

    async def check_leaving(self, forward: Forward) -> Counter[str]:
        if isinstance(self.reader, WatchedSource):
            return await self.reader.check_leaving(forward)
        return Counter()

    async def close(self) -> None:
        await self.reader.close()


def kind_ports(readers: Sequence[KindReader], client: redis.Redis, consumer: str, *,
               heartbeat_ttl_s: int, archive_max: int) -> list[Source]:
    """The configured kind readers, each behind the port."""
    return [KindPort(r, client, consumer, heartbeat_ttl_s=heartbeat_ttl_s, archive_max=archive_max) for r in readers]


def why_unreadable(exc: BaseException) -> str:
    """`ConnectionError (connection refused)`: the error's class and what kind of failure it is.

    Never the error's text: client libraries put URLs (and so passwords) into their messages.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 5:  # the error and what caused it
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for kind, test in _FAILURE_KINDS:
        if any(test(e, type(e).__name__.lower()) for e in chain):
            return f"{type(exc).__name__} ({kind})"
    return f"{type(exc).__name__} (unavailable)"


_FAILURE_KINDS: list[tuple[str, Callable[[BaseException, str], bool]]] = [
    ("authentication failed", lambda e, n: any(w in n for w in ("auth", "accessrefused", "credential", "denied"))),
    ("connection refused", lambda e, n: isinstance(e, ConnectionRefusedError) or n.endswith("refusederror")),
    ("timed out", lambda e, n: isinstance(e, TimeoutError) or "timeout" in n),
    ("host not found", lambda e, n: isinstance(e, socket.gaierror)),
    ("cannot connect", lambda e, n: isinstance(e, OSError) or "connection" in n),
]
