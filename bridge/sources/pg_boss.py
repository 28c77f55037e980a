"""pg-boss's failed jobs: rows of `<schema>.job` in state `failed` (pg-boss 10, PostgreSQL).

Watched, never changed (docs/design.md, section 2b): read over a read-only session
(`bridge.clients.postgres`). Score: `completed_on` (when pg-boss failed the job for the last time), in
microseconds. Read: `name` (the queue), `data` (the job's JSON, bounded), `output` (the error pg-boss
stored: the thrown error serialized, `{name, message, stack}`), `retry_count` and the timestamps.
A job is one member per (queue, id): pg-boss 10 partitions `job` by queue, and its primary key is
`(name, id)`, so a held job is looked up by both.

Leaving: `boss.retry(name, id)` puts the job back in state `retry` (and a failed retry fails it again
with a later `completed_on`): resolved as retried. A job moved to `<schema>.archive` after
`archiveFailedAfterSeconds` is pg-boss's own retention (no resolve); a job in neither table was
deleted (`boss.deleteJob`). Jobs pg-boss copies into a queue's `deadLetter` queue are new jobs in
state `created`; they are not alerted (their failed original is), but a dead-letter queue's own failed
jobs are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bridge.clients.postgres import PgReader, Row
from bridge.core.resolves import Reason
from bridge.sources.mapping import Mapped, to_int
from bridge.sources.pg_rows import bounded, first_line_error, iso_of, json_or_text, quoted, score_of, time_of
from bridge.sources.watched import StoreCap, WatchedSource
from bridge.sources.watched_table import After, Query, table_source

KIND = "pgboss"
UUID_LEN = 36
LOWEST_UUID = "00000000-0000-0000-0000-000000000000"
SCORE = score_of("completed_on")
ARCHIVE_DEFAULT_S = 12 * 3600.0  # pg-boss 10's archiveFailedAfterSeconds default (archiveCompletedAfterSeconds')


def member_of(queue: str, job_id: str) -> str:
    """`<uuid>:<queue>`: the uuid first (fixed length), so any queue name parses back."""
    return f"{job_id}:{queue}"


def split_member(member: str) -> tuple[str, str]:
    """(queue, uuid) of a member."""
    return member[UUID_LEN + 1 :], member[:UUID_LEN]


def error_of(output: Any) -> tuple[str | None, str | None]:
    """pg-boss's `output` of a failed job: a serialized Error `{name, message, stack}`, a `{value: …}`
    wrapper (timeouts, non-object values), or anything a worker passed to `fail`."""
    if isinstance(output, dict) and isinstance(output.get("value"), dict | str) and "message" not in output:
        output = output["value"]
    if isinstance(output, dict):
        name, message = output.get("name"), output.get("message")
        if isinstance(message, str) and message:
            return (name if isinstance(name, str) and name else None), message
        stack = output.get("stack")
        return first_line_error(stack if isinstance(stack, str) else None)
    if isinstance(output, str):
        return first_line_error(output)
    return (None, None) if output is None else (None, str(output)[:1000])


def map_row(row: Row) -> Mapped:
    error_class, message = error_of(json_or_text(row.get("output")))
    retries = to_int(row.get("retry_count"))
    queue, job_id = split_member(str(row["member"]))
    return Mapped(
        queue=queue,
        job_id=job_id,
        job_name=queue,  # a pg-boss job is named by its queue
        attempts=retries + 1 if retries is not None and retries >= 0 else None,
        error_class=error_class,
        error_message=message,
        first_failed_at=iso_of(row.get("score")),  # pg-boss keeps the last failure's time only
        payload=json_or_text(row.get("data")),
    )


class PgBossMapper:
    def __init__(self, schema: str, queues: list[str], archive_failed_after_s: float = ARCHIVE_DEFAULT_S) -> None:
        self._job = f"{quoted(schema)}.job"
        self._archive = f"{quoted(schema)}.archive"
        self._queues = list(queues)
        self.store = f"{schema}.job"
        self.source_key = f"{KIND}:{self.store}"
        setting = "pg-boss's archiveFailedAfterSeconds (archive_failed_after_s of [[sources.pgboss]])"
        self.retention: StoreCap | None = StoreCap(int(archive_failed_after_s), setting, unit="seconds")
        self.tables: tuple[str, ...] = (f"{schema}.job", f"{schema}.archive")

    def _where(self) -> str:
        return "state = 'failed'" + (" AND name = ANY(%(queues)s)" if self._queues else "")

    def page(self, after: After, limit: int, settle_s: float) -> Query:
        job_id = split_member(after.member)[1] if after.member else LOWEST_UUID
        sql = f"""SELECT id::text || ':' || name AS member, {SCORE} AS score, {bounded("data")} AS data,
            {bounded("output")} AS output, retry_count
            FROM {self._job} WHERE {self._where()}
              AND completed_on <= clock_timestamp() - make_interval(secs => %(settle_s)s)
              AND (completed_on, id) > (%(ts)s, %(id)s::uuid)
            ORDER BY completed_on, id LIMIT %(limit)s"""
        params = {
            "queues": self._queues,
            "settle_s": settle_s,
            "ts": time_of(after.score),
            "id": job_id,
            "limit": limit,
        }
        return sql, params

    def one(self, member: str) -> Query:
        queue, job_id = split_member(member)
        sql = f"""SELECT id::text || ':' || name AS member, {SCORE} AS score, {bounded("data")} AS data,
            {bounded("output")} AS output, retry_count
            FROM {self._job} WHERE name = %(queue)s AND id = %(id)s::uuid AND state = 'failed'"""
        return sql, {"queue": queue, "id": job_id}

    def fates(self, members: list[str]) -> Query:
        pairs = [split_member(m) for m in members]
        sql = f"""WITH held(name, id) AS (SELECT * FROM unnest(%(queues)s::text[], %(ids)s::uuid[]))
            SELECT j.id::text || ':' || j.name AS member,
                   CASE WHEN j.state = 'failed' THEN {score_of("j.completed_on")} END AS score, false AS archived
              FROM {self._job} j JOIN held h ON j.name = h.name AND j.id = h.id
            UNION ALL
            SELECT a.id::text || ':' || a.name, NULL, true
              FROM {self._archive} a JOIN held h ON a.name = h.name AND a.id = h.id"""
        return sql, {"queues": [q for q, _ in pairs], "ids": [i for _, i in pairs]}

    def reason(self, fate: Row | None) -> Reason | None:
        if fate is None:
            return "deleted"
        return None if fate.get("archived") else "retried"

    def pending(self, after: After) -> Query:
        sql = f"SELECT count(*) AS n FROM {self._job} WHERE {self._where()} AND completed_on > %(ts)s"
        return sql, {"queues": self._queues, "ts": time_of(after.score)}

    def total(self) -> Query:
        sql = f"""SELECT count(*) AS n, extract(epoch FROM clock_timestamp() - min(completed_on))::bigint AS age_s
            FROM {self._job} WHERE {self._where()}"""
        return sql, {"queues": self._queues}

    def mapped(self, row: Row) -> Mapped:
        return map_row(row)


def pgboss_source(
    name: str,
    db: PgReader,
    bridge: Any,
    *,
    schema: str = "pgboss",
    queues: list[str] | None = None,
    archive_failed_after_s: float = ARCHIVE_DEFAULT_S,
    lease_s: float = 60.0,
    poll_s: float = 30.0,
    settle_s: float = 2.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The failed jobs of the listed queues, or of every queue when empty."""
    mapper = PgBossMapper(schema, queues or [], archive_failed_after_s)
    return table_source(name, db, bridge, mapper, lease_s=lease_s, poll_s=poll_s, settle_s=settle_s, clock=clock)
