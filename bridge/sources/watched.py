"""Readers of sorted sets a job system owns: lease → map → finish, never a write to the set.

`WatchedSet` walks one sorted set in score order from the cursor's watermark; `WatchedSource`
round-robins the sets of one configured source (one per BullMQ or RQ queue, one for Sidekiq).
A kind supplies a `Mapper`: the id of a member, and the KindRecord of one member
(docs/design.md, section 2b).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, cast

import redis.asyncio as aioredis

from bridge.core.items import now_ms as wall_ms
from bridge.core.resolves import Reason
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.leaving import Judge, LeaveNote
from bridge.sources.source import AckNote
from bridge.stores.cursor import Cursor, Position
from bridge.stores.handoff import Parcel

PAGE = 50
HELD_PAGE = 250  # held jobs checked per round trip
HELD_PAGES_PER_CHECK = 40  # at most 10,000 held jobs per check of one set; the next check goes on from there
Forward = Callable[[str, Parcel], Awaitable[None]]


class Mapper(Protocol):
    members_are_ids: bool  # BullMQ, RQ: the member is the job id; Sidekiq: the job's JSON

    def member_id(self, member: bytes) -> str: ...

    async def record(self, member: bytes, score: str, receipt: Receipt) -> KindRecord: ...

    async def cap(self) -> StoreCap | None:
        """The count the job system trims this set at, and the setting that says so (None: unknown)."""
        ...


@dataclass(frozen=True)
class StoreCap:
    """Where a job system trims a set: at `limit` jobs, or (`unit` "seconds") at jobs `limit` seconds
    old; `level` is how far along a cap by age is (the age of the oldest job, in seconds)."""

    limit: int
    setting: str
    unit: str = "jobs"
    level: int | None = None


@dataclass(frozen=True)
class StoreFill:
    """How full an owner-held set is: its size (or, for a cap by age, its oldest job's age), and the
    cap its own job system trims it at."""

    store: str
    count: int
    cap: StoreCap | None


class WatchedStore(Protocol):
    """One owner-held store and its cursor: a Redis sorted set (`WatchedSet`) or a job table
    (`bridge.sources.watched_table.WatchedTable`)."""

    key: str

    async def claim(self) -> KindRecord | None: ...

    async def finish(self, position: Position, note: AckNote | None = None) -> None: ...

    async def check_leaving(self, forward: Forward) -> Counter[str]: ...

    async def fill(self) -> StoreFill: ...

    async def depth(self) -> int: ...


class WatchedSet:
    """One owner-held sorted set and its cursor."""

    def __init__(
        self,
        store: aioredis.Redis,
        key: str,
        cursor: Cursor,
        mapper: Mapper,
        source_name: str,
        clock: Callable[[], float] = time.time,
        judge: Judge | None = None,
    ) -> None:
        self.key = key
        self._store = store
        self._cursor = cursor
        self._mapper = mapper
        self._source = source_name
        self._clock = clock
        self._judge = judge
        self._held_scan = 0  # ZSCAN cursor over the held jobs, kept between checks

    async def claim(self) -> KindRecord | None:
        now_ms = int(self._clock() * 1000)
        # one at a time: a lease taken over here is handed out now, never left re-leased and unread
        for position in await self._cursor.reclaim_expired(now_ms, limit=1):
            record = await self._reload(position)
            if record is not None:
                return record
        return await self._scan(now_ms)

    async def finish(self, position: Position, note: AckNote | None = None) -> None:
        if note is None or self._judge is None:
            await self._cursor.finish(position)
        else:
            await self._cursor.finish_and_hold(position, note.encode())

    async def check_leaving(self, forward: Forward) -> Counter[str]:
        """Look for held jobs gone from the store (see `bridge.sources.leaving`); resolves queued, by reason."""
        queued: Counter[str] = Counter()
        if self._judge is None:
            return queued
        for _ in range(HELD_PAGES_PER_CHECK):
            self._held_scan, held = await self._cursor.held_page(self._held_scan, HELD_PAGE)
            present = await self._present(held)
            for position, here in zip(held, present, strict=True):
                if not here and (reason := await self._departed(position, forward)):
                    queued[reason] += 1
            if self._held_scan == 0:
                break
        return queued

    async def _present(self, held: list[Position]) -> list[bool]:
        """One pipelined batch: is each held job still in the store (at its score, for Sidekiq)?"""
        if not held:
            return []
        async with self._store.pipeline(transaction=False) as pipe:
            for position in held:
                if self._mapper.members_are_ids:
                    pipe.zscore(self.key, position.member_id)
                else:
                    pipe.zrangebyscore(self.key, position.score, position.score)
            rows = await pipe.execute()
        if self._mapper.members_are_ids:
            return [row is not None for row in rows]
        return [
            any(self._mapper.member_id(bytes(m)) == p.member_id for m in row) for p, row in zip(held, rows, strict=True)
        ]

    async def _departed(self, position: Position, forward: Forward) -> Reason | None:
        """The reason of a resolve this call queued; None for a trim, or a departure another replica took."""
        assert self._judge is not None
        reason = await self._judge.why_gone(self._store, self.key, position, self._clock())
        raw = await self._cursor.held_note(position.member_id) if reason else None
        if reason is None or raw is None:
            await self._cursor.depart(position)  # trimmed by the producer (or no note): forget it
            return None
        parcel = resolve_parcel(LeaveNote.decode(raw), reason, wall_ms())  # queue order is real time
        if not await self._cursor.depart(position, parcel.id, parcel.encode()):
            return None
        await forward(self._cursor.outbox, parcel)
        return reason

    async def fill(self) -> StoreFill:
        cap = await self._mapper.cap()
        if cap is not None and cap.level is not None:
            return StoreFill(self.key, cap.level, cap)
        return StoreFill(self.key, int(await self._store.zcard(self.key)), cap)

    async def depth(self) -> int:
        mark = await self._cursor.watermark()
        return int(await self._store.zcount(self.key, f"({mark}" if mark else "-inf", "+inf"))

    def token(self, position: Position) -> str:
        return "\n".join((self.key, position.score, position.member_id))

    async def _scan(self, now_ms: int) -> KindRecord | None:
        mark = await self._cursor.watermark()
        offset = 0
        while True:
            page = await self._page(mark or "-inf", offset)
            if not page:
                return None
            for member, score in page:
                position = Position(score=score, member_id=self._mapper.member_id(member))
                if await self._cursor.claim(position, now_ms):
                    return await self._record(member, score, position)
            offset += len(page)

    async def _page(self, low: str, offset: int) -> list[tuple[bytes, str]]:
        rows = await self._store.zrangebyscore(
            self.key, low, "+inf", start=offset, num=PAGE, withscores=True, score_cast_func=_score_text
        )
        return [(bytes(member), str(score)) for member, score in cast(list[tuple[bytes, str]], rows)]

    async def _reload(self, position: Position) -> KindRecord | None:
        """The record of a reclaimed lease, or None (and the lease dropped) when it left the set."""
        rows = await self._store.zrangebyscore(
            self.key, position.score, position.score, withscores=True, score_cast_func=_score_text
        )
        for member, score in cast(list[tuple[bytes, str]], rows):
            if self._mapper.member_id(member) == position.member_id:
                return await self._record(member, score, position)
        await self._cursor.release(position)
        return None

    async def _record(self, member: bytes, score: str, position: Position) -> KindRecord:
        receipt = Receipt(source=self._source, token=self.token(position))
        record = await self._mapper.record(member, score, receipt)
        return replace(record, claimed_at=self._clock())


def resolve_parcel(note: LeaveNote, reason: Reason, ms: int) -> Parcel:
    resolve = note.resolve.model_copy(update={"reason": reason})
    return Parcel(resolve.item_id(ms), ms, list(note.sinks), resolve.model_dump_json())


def _score_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class WatchedSource:
    """All sets (or tables) of one configured watched source, visited in turn."""

    def __init__(
        self,
        name: str,
        discover: Callable[[], Awaitable[Sequence[WatchedStore]]],
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.leave_check_s = 5.0  # the table's `leave_check_s` (set by `bridge.sources.build`)
        self._name = name
        self._discover = discover
        self._on_close = on_close
        self._sets: dict[str, WatchedStore] = {}
        self._next = 0

    @property
    def name(self) -> str:
        return self._name

    async def rescan(self) -> list[str]:
        """Pick up sets created since the last scan (new BullMQ/RQ queues)."""
        for watched in await self._discover():
            self._sets.setdefault(watched.key, watched)
        return sorted(self._sets)

    async def claim(self) -> KindRecord | None:
        if not self._sets:
            await self.rescan()
        ordered = list(self._sets.values())
        for i in range(len(ordered)):
            watched = ordered[(self._next + i) % len(ordered)]
            record = await watched.claim()
            if record is not None:
                self._next = (self._next + i + 1) % len(ordered)
                return record
        return None

    async def ack(self, receipt: Receipt) -> bool:
        return await self.ack_held(receipt, None)

    async def ack_held(self, receipt: Receipt, note: AckNote | None) -> bool:
        """`ack`, holding the job with `note` so its alert is resolved when it leaves the store."""
        key, score, member_id = _parse_token(receipt.token)
        watched = self._sets.get(key)
        if receipt.source != self._name or watched is None:
            return False
        await watched.finish(Position(score=score, member_id=member_id), note)
        return True

    def stores(self) -> list[WatchedStore]:
        """The sets (or tables) discovered so far."""
        return list(self._sets.values())

    async def check_leaving(self, forward: Forward) -> Counter[str]:
        """Every set's held jobs that left the store (`WatchedSet.check_leaving`)."""
        queued: Counter[str] = Counter()
        for watched in list(self._sets.values()):
            queued += await watched.check_leaving(forward)
        return queued

    async def depth(self) -> int:
        return sum([await watched.depth() for watched in self._sets.values()])

    async def fills(self) -> list[StoreFill]:
        """Each discovered set's size against its job system's own cap (the console's retention banner)."""
        return [await watched.fill() for watched in list(self._sets.values())]

    async def depths(self) -> dict[str, int]:
        return {key: await watched.depth() for key, watched in self._sets.items()}

    async def close(self) -> None:
        if self._on_close is not None:
            await self._on_close()


def _parse_token(token: str) -> tuple[str, str, str]:
    key, _, rest = token.partition("\n")
    score, _, member_id = rest.partition("\n")
    return key, score, member_id
