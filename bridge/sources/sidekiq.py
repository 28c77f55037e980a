"""Sidekiq's dead set: the `dead` sorted set (score = time of death), each member the job's JSON.

Watched, never changed: Sidekiq Web is where operators retry (docs/design.md, section 2b).
Fields read: `class` (or ActiveJob's `wrapped` / `args[0].job_class`), `queue`, `jid`,
`error_class`, `error_message`, `failed_at`, `retry_count`, `args`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from bridge.core.resolves import Reason
from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.leaving import older_job_present
from bridge.sources.mapping import Mapped, iso_from_epoch, text, to_int, to_raw
from bridge.sources.watched import StoreCap, WatchedSet, WatchedSource
from bridge.stores.cursor import Cursor, Position

KIND = "sidekiq"
TRIM_MARGIN_S = 3600.0  # a job this close to the age horizon may have been trimmed
ACTIVE_JOB_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"


def dead_set_key(namespace: str = "") -> str:
    """Sidekiq's dead set (`dead`, or `<namespace>:dead` with redis-namespace): read, never written."""
    return f"{namespace}:dead" if namespace else "dead"



def parse_member(member: bytes) -> dict[str, Any] | None:
    try:
        job = json.loads(member)
    except (ValueError, RecursionError):
        return None
    return job if isinstance(job, dict) else None


def map_job(job: dict[str, Any]) -> Mapped:
    """One Sidekiq job hash (as JSON) → the envelope fields."""
    retry_count = to_int(job.get("retry_count"))
    traceparent, tracestate = trace_carriers.sidekiq(job)
    return Mapped(
        queue=text(job.get("queue")) or "default",
        job_id=str(job.get("jid") or ""),
        job_name=job_name(job),
        attempts=None if retry_count is None else retry_count + 1,
        error_class=text(job.get("error_class")),
        error_message=text(job.get("error_message")),
        first_failed_at=iso_from_epoch(job.get("failed_at")),
        payload=job.get("args"),
        traceparent=traceparent,
        tracestate=tracestate,
    )


def job_name(job: dict[str, Any]) -> str | None:
    """The worker class; for ActiveJob, the wrapped job class."""
    wrapped = text(job.get("wrapped"))
    if wrapped:
        return wrapped
    args = job.get("args")
    if job.get("class") == ACTIVE_JOB_WRAPPER and isinstance(args, list) and args and isinstance(args[0], dict):
        return text(args[0].get("job_class")) or ACTIVE_JOB_WRAPPER
    return text(job.get("class"))


class SidekiqJudge:
    """Sidekiq trims its dead set in `DeadSet#kill`: deaths older than `dead_timeout_in_seconds`, and
    all but the newest `dead_max_jobs - 1`, both from the oldest up. A job that left while an older one
    is still there, or while it was young and the set not full, was retried or deleted by hand."""

    def __init__(self, max_jobs: int, timeout_s: float) -> None:
        self._max_jobs = max_jobs
        self._timeout_s = timeout_s

    async def why_gone(self, store: aioredis.Redis, key: str, left: Position, now_s: float) -> Reason | None:
        if await older_job_present(store, key, left, members_are_ids=False):
            return "retried"
        young = now_s - float(left.score) + TRIM_MARGIN_S < self._timeout_s
        if young and int(await store.zcard(key)) < self._max_jobs - 1:
            return "retried"
        return None


class SidekiqMapper:
    members_are_ids = False

    def __init__(self, source_key: str, dead_max_jobs: int = 10_000) -> None:
        self._source_key = source_key
        self._cap = StoreCap(dead_max_jobs, "Sidekiq's dead_max_jobs (`dead_max_jobs` of the [[sources.sidekiq]] "
                             "table says what the app set)")

    async def cap(self) -> StoreCap:
        return self._cap

    def member_id(self, member: bytes) -> str:
        job = parse_member(member)
        jid = text(job.get("jid")) if job else None
        return jid or "sha256:" + hashlib.sha256(member).hexdigest()[:16]

    async def record(self, member: bytes, score: str, receipt: Receipt) -> KindRecord:
        job = parse_member(member)
        member_id = self.member_id(member)
        if job is None or not text(job.get("jid")):
            # not a Sidekiq job: the native bytes go to normalize, which makes it an unparseable alert
            return KindRecord(self._source_key, "dead", member_id, member, receipt)
        mapped = map_job(job)
        return KindRecord(self._source_key, mapped.queue, mapped.job_id, to_raw(mapped), receipt)


def sidekiq_source(
    name: str,
    store: aioredis.Redis,
    bridge: aioredis.Redis,
    *,
    namespace: str = "",
    lease_s: float = 60.0,
    clock: Callable[[], float] = time.time,
    dead_max_jobs: int = 10_000,
    dead_timeout_s: float = 180 * 24 * 3600.0,
) -> WatchedSource:
    """The dead set of one Sidekiq (its Redis may differ from the bridge's, which keeps the cursor)."""
    key = dead_set_key(namespace)
    cursor = Cursor(bridge, name, lease_s=lease_s)
    judge = SidekiqJudge(dead_max_jobs, dead_timeout_s)
    watched = WatchedSet(store, key, cursor, SidekiqMapper(f"{KIND}:{key}", dead_max_jobs), name, clock, judge)

    async def discover() -> list[WatchedSet]:
        return [watched]

    return WatchedSource(name, discover)
