"""Procrastinate's failed jobs: `procrastinate_jobs` with status `failed` (Procrastinate 3, PostgreSQL).

Watched, never changed (docs/design.md, section 2b), over a read-only session. Procrastinate records
each transition in `procrastinate_events`; the walker's score is the id of a job's latest `failed` event,
read forward from the watermark by that table's primary key (so a poll reads only new events). Read:
`queue_name`, `task_name`, `args` (JSON, bounded), `attempts`, and the time of that event. Procrastinate
keeps no error text in the database (the exception goes to the worker's log only): the alert says so.

Leaving: `JobManager.retry_job_by_id` (the admin's and CLI's retry) sets the job back to `todo` (a
failed retry fails it again, with a new event): resolved as retried. A job gone from the table resolves
nothing: Procrastinate's own `remove_old_jobs` deletes failed jobs too, and a delete by hand looks the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bridge.clients.postgres import PgReader, Row
from bridge.core.resolves import Reason
from bridge.sources.mapping import Mapped, to_int
from bridge.sources.pg_rows import bounded, json_or_text, quoted
from bridge.sources.watched import StoreCap, WatchedSource
from bridge.sources.watched_table import After, Query, table_source

KIND = "procrastinate"
NO_ERROR_TEXT = "job failed (Procrastinate keeps no error text in the database: see the worker's log)"


def map_row(row: Row) -> Mapped:
    attempts = to_int(row.get("attempts"))
    failed_at = row.get("failed_at")
    return Mapped(
        queue=str(row.get("queue_name") or ""),
        job_id=str(row["member"]),
        job_name=row.get("task_name") or None,
        attempts=attempts if attempts is not None and attempts > 0 else None,
        error_message=NO_ERROR_TEXT,
        first_failed_at=failed_at.isoformat() if failed_at is not None else None,  # the last failure's time
        payload=json_or_text(row.get("args")),
    )


class ProcrastinateMapper:
    def __init__(self, schema: str, queues: list[str]) -> None:
        self._jobs = f"{quoted(schema)}.procrastinate_jobs"
        self._events = f"{quoted(schema)}.procrastinate_events"
        self._queues = list(queues)
        self.store = f"{schema}.procrastinate_jobs"
        self.source_key = f"{KIND}:{self.store}"
        self.retention: StoreCap | None = None  # failed jobs stay until deleted
        self.tables: tuple[str, ...] = (f"{schema}.procrastinate_jobs", f"{schema}.procrastinate_events")

    def _failed(self) -> str:
        """A job's latest `failed` event, of a job still failed (`e` the event, `j` the job)."""
        queues = " AND j.queue_name = ANY(%(queues)s)" if self._queues else ""
        return f"""e.type = 'failed' AND j.status = 'failed'{queues}
            AND NOT EXISTS (SELECT 1 FROM {self._events} l WHERE l.job_id = e.job_id AND l.type = 'failed'
                            AND l.id > e.id)"""

    def _select(self) -> str:
        return f"""SELECT j.id::text AS member, e.id AS score, e.at AS failed_at, j.queue_name, j.task_name,
            {bounded("j.args")} AS args, j.attempts
            FROM {self._events} e JOIN {self._jobs} j ON j.id = e.job_id"""

    def page(self, after: After, limit: int, settle_s: float) -> Query:
        sql = f"""{self._select()} WHERE e.id > %(after)s AND {self._failed()}
              AND e.at <= clock_timestamp() - make_interval(secs => %(settle_s)s)
            ORDER BY e.id LIMIT %(limit)s"""
        return sql, {"after": _after(after), "queues": self._queues, "settle_s": settle_s, "limit": limit}

    def one(self, member: str) -> Query:
        sql = f"{self._select()} WHERE j.id = %(id)s AND {self._failed()}"
        return sql, {"id": int(member), "queues": self._queues}

    def fates(self, members: list[str]) -> Query:
        sql = f"""SELECT j.id::text AS member, CASE WHEN j.status = 'failed' THEN f.id END AS score
            FROM {self._jobs} j
            LEFT JOIN LATERAL (SELECT max(e.id) AS id FROM {self._events} e
                               WHERE e.job_id = j.id AND e.type = 'failed') f ON true
            WHERE j.id = ANY(%(ids)s::bigint[])"""
        return sql, {"ids": [int(m) for m in members]}

    def reason(self, fate: Row | None) -> Reason | None:
        return None if fate is None else "retried"

    def pending(self, after: After) -> Query:
        sql = f"""SELECT count(*) AS n FROM {self._events} e JOIN {self._jobs} j ON j.id = e.job_id
            WHERE e.id > %(after)s AND {self._failed()}"""
        return sql, {"after": after.score, "queues": self._queues}

    def total(self) -> Query:
        queues = " AND queue_name = ANY(%(queues)s)" if self._queues else ""
        sql = f"SELECT count(*) AS n, NULL AS age_s FROM {self._jobs} WHERE status = 'failed'{queues}"
        return sql, {"queues": self._queues}

    def mapped(self, row: Row) -> Mapped:
        return map_row(row)


def _after(after: After) -> int:
    """Event ids are unique: from the watermark itself at the start of a pass, past it afterwards."""
    return after.score - 1 if after.member is None else after.score


def procrastinate_source(
    name: str,
    db: PgReader,
    bridge: Any,
    *,
    schema: str = "public",
    queues: list[str] | None = None,
    lease_s: float = 60.0,
    poll_s: float = 30.0,
    settle_s: float = 2.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The failed jobs of the listed queues, or of every queue when empty."""
    mapper = ProcrastinateMapper(schema, queues or [])
    return table_source(name, db, bridge, mapper, lease_s=lease_s, poll_s=poll_s, settle_s=settle_s, clock=clock)
