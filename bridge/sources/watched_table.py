"""Readers of job tables a job system owns in PostgreSQL: lease → map → finish, never a write there.

`WatchedTable` walks one job table's failed rows in the order of a *score* (a bigint each kind's SQL
computes: the failure time in microseconds, or the id of the failure's event) and the job id, from the
cursor's watermark in the bridge's Redis (`bridge.stores.cursor`, the same cursor as the Redis kinds),
so each failed job is alerted once across restarts and replicas. A pass reads pages of PAGE rows by
keyset (`(score, id) > last`) and hands them out one claim at a time; when a pass finds nothing new
the next one starts no sooner than `poll_s` later, so an idle source costs one query per `poll_s`.
Rows that failed less than `settle_s` ago are left for the next pass: a transaction that commits
late with an older time must not land below the watermark.

A kind supplies a `TableMapper`: its SQL (read-only, by parameters, never by string-built values),
the mapping of one row, and why a held job left (docs/design.md, section 2b).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from bridge.clients.postgres import PgReader, Row
from bridge.core.items import now_ms as wall_ms
from bridge.core.resolves import Reason
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.leaving import LeaveNote
from bridge.sources.mapping import Mapped, to_raw
from bridge.sources.source import AckNote
from bridge.sources.watched import Forward, StoreCap, StoreFill, WatchedSource, resolve_parcel
from bridge.stores.cursor import Cursor, Position

PAGE = 200
HELD_PAGE = 250
HELD_PAGES_PER_CHECK = 40
Query = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class After:
    """A place in a table's (score, member) order; `member` None: before every job at `score`."""

    score: int
    member: str | None = None


class TableMapper(Protocol):
    """One job system's failed rows. Every row a query returns carries `score` (int) and `member` (str: the
    job's id in the cursor, which may add what finds the row by its primary key, e.g. pg-boss's queue)."""

    store: str  # names the table in tokens, metrics and `check`: "pgboss.job"
    source_key: str  # "<kind>:<store>"
    tables: tuple[str, ...]  # every table its SQL reads, schema-qualified (`check` reports the grants)
    retention: StoreCap | None  # the age (`unit` "seconds") its job system removes failed jobs at; None: never

    def page(self, after: After, limit: int, settle_s: float) -> Query:
        """Failed rows after `after`, in (score, id) order, settled for `settle_s` seconds."""
        ...

    def one(self, member: str) -> Query:
        """The row of one job while it is failed (no row: it is not)."""
        ...

    def fates(self, members: list[str]) -> Query:
        """One row per job still in the table: `member`, `score` (None unless failed), and what the kind's
        `reason` reads."""
        ...

    def reason(self, fate: Row | None) -> Reason | None:
        """Why a held job is no longer failed at its score: retried, deleted, or None (its own retention)."""
        ...

    def pending(self, after: After) -> Query:
        """`n`: failed rows after `after`."""
        ...

    def total(self) -> Query:
        """`n`: every failed row, `age_s`: the oldest one's age in seconds (the retention banner)."""
        ...

    def mapped(self, row: Row) -> Mapped: ...


ACCESS_SQL = """SELECT t AS name, to_regclass(t) IS NOT NULL AS found,
    CASE WHEN to_regclass(t) IS NOT NULL THEN has_table_privilege(t, 'SELECT') END AS can_select,
    CASE WHEN to_regclass(t) IS NOT NULL THEN has_table_privilege(t, 'INSERT, UPDATE, DELETE, TRUNCATE') END
        AS can_write
    FROM unnest(%(tables)s::text[]) t"""


@dataclass(frozen=True)
class Access:
    """What the bridge's role may do on the tables a kind reads (`dlq-bridge check`)."""

    missing: tuple[str, ...]
    unreadable: tuple[str, ...]
    writable: tuple[str, ...]
    readable: tuple[str, ...]


class WatchedTable:
    """One job table, its failed rows and their cursor."""

    def __init__(
        self,
        db: PgReader,
        cursor: Cursor,
        mapper: TableMapper,
        source_name: str,
        *,
        poll_s: float = 30.0,
        settle_s: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = mapper.store
        self._db = db
        self._cursor = cursor
        self._mapper = mapper
        self._source = source_name
        self._poll_s = poll_s
        self._settle_s = settle_s
        self._clock = clock
        self._pending: deque[Row] = deque()
        self._after: After | None = None  # where this pass goes on; None: between passes
        self._seen: After | None = None  # where the previous pass ended
        self._rest_until = 0.0
        self._held_scan = 0

    async def claim(self) -> KindRecord | None:
        now_ms = int(self._clock() * 1000)
        for position in await self._cursor.reclaim_expired(now_ms, limit=1):
            record = await self._reload(position)
            if record is not None:
                return record
        while self._pending or await self._refill():
            row = self._pending.popleft()
            position = Position(score=str(row["score"]), member_id=str(row["member"]))
            if await self._cursor.claim(position, now_ms):
                return self._record(row, position)
        return None

    async def _refill(self) -> bool:
        """The next page of this pass; False (and a rest of `poll_s`) when the pass found no more."""
        if self._after is None:
            if self._clock() < self._rest_until:
                return False
            self._after = await self._start()
        rows = await self._db.rows(*self._mapper.page(self._after, PAGE, self._settle_s))
        if not rows:
            self._seen, self._after = self._after, None
            self._rest_until = self._clock() + self._poll_s
            return False
        self._after = After(int(rows[-1]["score"]), str(rows[-1]["member"]))
        self._pending.extend(rows)
        return True

    async def _start(self) -> After:
        """Where a pass starts: the watermark, or the last row this reader's previous pass saw when that is
        not below it (every row before it was finished or leased then; a lease that expires comes back
        through `reclaim_expired`), so an idle poll is one query that returns nothing."""
        mark = await self._mark()
        seen = self._seen
        return seen if seen is not None and seen.score >= mark else After(mark)

    async def _mark(self) -> int:
        mark = await self._cursor.watermark()
        return int(float(mark)) if mark else 0

    async def _reload(self, position: Position) -> KindRecord | None:
        """The record of a reclaimed lease, or None (and the lease dropped) when the job is no longer failed there."""
        rows = await self._db.rows(*self._mapper.one(position.member_id))
        if rows and str(rows[0]["score"]) == position.score:
            return self._record(rows[0], position)
        await self._cursor.release(position)
        return None

    def _record(self, row: Row, position: Position) -> KindRecord:
        mapped = self._mapper.mapped(row)
        receipt = Receipt(source=self._source, token=self.token(position))
        raw = to_raw(mapped)
        return KindRecord(self._mapper.source_key, mapped.queue, mapped.job_id, raw, receipt, self._clock())

    def token(self, position: Position) -> str:
        return "\n".join((self.key, position.score, position.member_id))

    async def finish(self, position: Position, note: AckNote | None = None) -> None:
        if note is None:
            await self._cursor.finish(position)
        else:
            await self._cursor.finish_and_hold(position, note.encode())

    async def check_leaving(self, forward: Forward) -> Counter[str]:
        """Held jobs no longer failed at their score: resolves queued, by reason (one query per page)."""
        queued: Counter[str] = Counter()
        for _ in range(HELD_PAGES_PER_CHECK):
            self._held_scan, held = await self._cursor.held_page(self._held_scan, HELD_PAGE)
            if held:
                rows = await self._db.rows(*self._mapper.fates([p.member_id for p in held]))
                fates = {str(r["member"]): r for r in rows}
                for position in held:
                    fate = fates.get(position.member_id)
                    if fate is not None and str(fate["score"]) == position.score:
                        continue  # still failed, at the same failure
                    if reason := await self._departed(position, self._mapper.reason(fate), forward):
                        queued[reason] += 1
            if self._held_scan == 0:
                break
        return queued

    async def _departed(self, position: Position, reason: Reason | None, forward: Forward) -> Reason | None:
        raw = await self._cursor.held_note(position.member_id) if reason else None
        if reason is None or raw is None:
            await self._cursor.depart(position)  # the job system's own retention (or no note): forget it
            return None
        parcel = resolve_parcel(LeaveNote.decode(raw), reason, wall_ms())
        if not await self._cursor.depart(position, parcel.id, parcel.encode()):
            return None  # another replica took it
        await forward(self._cursor.outbox, parcel)
        return reason

    async def depth(self) -> int:
        rows = await self._db.rows(*self._mapper.pending(After(await self._mark(), None)))
        return int(rows[0]["n"]) if rows else 0

    async def access(self) -> Access:
        rows = await self._db.rows(ACCESS_SQL, {"tables": list(self._mapper.tables)})

        def named(test: Callable[[Row], bool]) -> tuple[str, ...]:
            return tuple(str(r["name"]) for r in rows if test(r))

        return Access(
            missing=named(lambda r: not r["found"]),
            unreadable=named(lambda r: r["found"] and not r["can_select"]),
            writable=named(lambda r: bool(r["can_write"])),
            readable=named(lambda r: bool(r["can_select"])),
        )

    async def fill(self) -> StoreFill:
        """The failed rows against the job system's own retention: by age where it has one (pg-boss archives
        failed jobs after `archiveFailedAfterSeconds`), else their count alone."""
        rows = await self._db.rows(*self._mapper.total())
        count = int(rows[0]["n"]) if rows else 0
        cap = self._mapper.retention
        if cap is None or not count:
            return StoreFill(self.key, count, None)
        age_s = max(0, int(rows[0]["age_s"] or 0))
        return StoreFill(self.key, age_s, replace(cap, level=age_s))


def table_source(
    name: str,
    db: PgReader,
    bridge: Any,
    mapper: TableMapper,
    *,
    lease_s: float,
    poll_s: float,
    settle_s: float,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """One job system's table of failed jobs as a source: one walker on the source's cursor."""
    table = WatchedTable(
        db, Cursor(bridge, name, lease_s=lease_s), mapper, name, poll_s=poll_s, settle_s=settle_s, clock=clock
    )

    async def discover() -> list[WatchedTable]:
        return [table]

    return WatchedSource(name, discover, on_close=db.close)
