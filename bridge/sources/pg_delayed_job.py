"""Delayed Job's failed jobs: rows of `delayed_jobs` with `failed_at` set (ActiveRecord backend, PostgreSQL).

Watched, never changed (docs/design.md, section 2b), over a read-only session. Delayed Job keeps a job
that ran out of attempts only when the app sets `Delayed::Worker.destroy_failed_jobs = false` (by default
it deletes it: then there is nothing to read). Score: `failed_at` in microseconds, a `timestamp` that
ActiveRecord writes in UTC (`default_timezone = :utc`, Rails' default). Read: `queue`, `attempts`,
`last_error` (Delayed Job writes the exception's message, then its backtrace: no class), bounded, and the
`handler` as bounded text: its YAML is never loaded, only the class it names is read from its tags
(`--- !ruby/object:ChargeCardJob`, ActiveJob's `job_class`, a PerformableMethod's `method_name`).

Leaving: `failed_at = NULL` (delayed_job_web's Requeue, or by hand in a console) resolves as retried, as
does a job failing again later; a row deleted resolves as deleted (Delayed Job never deletes a failed
job it kept).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from bridge.clients.postgres import PgReader, Row
from bridge.core.resolves import Reason
from bridge.sources.mapping import Mapped, to_int
from bridge.sources.pg_rows import bounded, first_line_error, iso_of, quoted, score_of, time_of
from bridge.sources.watched import StoreCap, WatchedSource
from bridge.sources.watched_table import After, Query, table_source

KIND = "delayed_job"
SCORE = score_of("failed_at")
_TAG = re.compile(r"^--- !ruby/(?:object|struct):([A-Za-z_][\w:]*)", re.MULTILINE)
_JOB_CLASS = re.compile(r"^\s+job_class: ['\"]?([A-Za-z_][\w:]*)", re.MULTILINE)
_METHOD = re.compile(r"^method_name: :?['\"]?(\w+[?!=]?)", re.MULTILINE)
_OBJECT = re.compile(r"^object: !ruby/\w+:([A-Za-z_][\w:]*)", re.MULTILINE)


def job_name(handler: str | None) -> str | None:
    """The job class a handler's YAML names, read from its text (never loaded)."""
    if not handler:
        return None
    tag = _TAG.search(handler)
    name = tag.group(1) if tag else None
    if name and name.endswith("JobWrapper") and (wrapped := _JOB_CLASS.search(handler)):
        return wrapped.group(1)
    if name == "Delayed::PerformableMethod" and (method := _METHOD.search(handler)):
        target = _OBJECT.search(handler)
        return f"{target.group(1)}#{method.group(1)}" if target else method.group(1)
    return name


def map_row(row: Row) -> Mapped:
    error_class, message = first_line_error(row.get("last_error"))
    attempts = to_int(row.get("attempts"))
    return Mapped(
        queue=str(row.get("queue") or "default"),
        job_id=str(row["member"]),
        job_name=job_name(row.get("handler")),
        attempts=attempts if attempts is not None and attempts > 0 else None,
        error_class=error_class,
        error_message=message,
        first_failed_at=iso_of(row.get("score")),
        payload=row.get("handler"),
    )


class DelayedJobMapper:
    def __init__(self, schema: str, table: str, queues: list[str]) -> None:
        self._table = f"{quoted(schema)}.{quoted(table)}"
        self._queues = list(queues)
        self.store = f"{schema}.{table}"
        self.source_key = f"{KIND}:{self.store}"
        self.retention: StoreCap | None = None  # failed jobs stay until deleted
        self.tables: tuple[str, ...] = (f"{schema}.{table}",)

    def _where(self) -> str:
        return "failed_at IS NOT NULL" + (" AND queue = ANY(%(queues)s)" if self._queues else "")

    def _select(self) -> str:
        return f"""SELECT id::text AS member, {SCORE} AS score, queue, attempts, {bounded("last_error")} AS last_error,
            {bounded("handler")} AS handler FROM {self._table}"""

    def page(self, after: After, limit: int, settle_s: float) -> Query:
        sql = f"""{self._select()} WHERE {self._where()}
              AND failed_at <= (clock_timestamp() AT TIME ZONE 'UTC') - make_interval(secs => %(settle_s)s)
              AND (failed_at, id) > (%(ts)s, %(id)s)
            ORDER BY failed_at, id LIMIT %(limit)s"""
        job_id = int(after.member) if after.member else -1
        params = {"queues": self._queues, "settle_s": settle_s, "ts": _naive(after.score), "id": job_id}
        return sql, {**params, "limit": limit}

    def one(self, member: str) -> Query:
        return f"{self._select()} WHERE id = %(id)s AND {self._where()}", {"id": int(member), "queues": self._queues}

    def fates(self, members: list[str]) -> Query:
        sql = f"SELECT id::text AS member, {SCORE} AS score FROM {self._table} WHERE id = ANY(%(ids)s)"
        return sql, {"ids": [int(m) for m in members]}

    def reason(self, fate: Row | None) -> Reason | None:
        return "deleted" if fate is None else "retried"

    def pending(self, after: After) -> Query:
        sql = f"SELECT count(*) AS n FROM {self._table} WHERE {self._where()} AND failed_at > %(ts)s"
        return sql, {"queues": self._queues, "ts": _naive(after.score)}

    def total(self) -> Query:
        sql = f"SELECT count(*) AS n, NULL AS age_s FROM {self._table} WHERE {self._where()}"
        return sql, {"queues": self._queues}

    def mapped(self, row: Row) -> Mapped:
        return map_row(row)


def _naive(score: int) -> Any:
    """A score as the UTC `timestamp` (without time zone) ActiveRecord writes."""
    return time_of(score).replace(tzinfo=None)


def delayed_job_source(
    name: str,
    db: PgReader,
    bridge: Any,
    *,
    schema: str = "public",
    table: str = "delayed_jobs",
    queues: list[str] | None = None,
    lease_s: float = 60.0,
    poll_s: float = 30.0,
    settle_s: float = 2.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The failed jobs of the listed queues, or of every queue when empty."""
    mapper = DelayedJobMapper(schema, table, queues or [])
    return table_source(name, db, bridge, mapper, lease_s=lease_s, poll_s=poll_s, settle_s=settle_s, clock=clock)
