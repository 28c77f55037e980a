"""BullMQ's failed jobs: `<prefix>:<queue>:failed` (score = finishedOn, ms) and the job hash.

Watched, never changed: Bull Board is where operators retry (docs/design.md, section 2b).
Job hash fields read: `name`, `data` (JSON), `failedReason`, `stacktrace` (JSON array, one entry
per failed attempt, each starting `<ErrorName>: <message>`), `atm` (attempts made, BullMQ 5+;
`attemptsMade` before), `finishedOn` (ms; BullMQ keeps no time of the first failure).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, cast

import redis.asyncio as aioredis

from bridge.core.resolves import Reason
from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.leaving import older_job_present
from bridge.sources.mapping import Mapped, iso_from_epoch, split_error, text, to_int, to_raw
from bridge.sources.watched import StoreCap, WatchedSet, WatchedSource
from bridge.stores.cursor import Cursor, Position

KIND = "bullmq"


# BullMQ's own keys: read, never written.
def failed_key(prefix: str, queue: str) -> str:
    return f"{prefix}:{queue}:failed"


def job_key(prefix: str, queue: str, job_id: str) -> str:
    return f"{prefix}:{queue}:{job_id}"


def meta_match(prefix: str) -> str:
    """SCAN pattern finding BullMQ queues by their `meta` hash."""
    return f"{prefix}:*:meta"



def map_job(queue: str, job_id: str, fields: dict[bytes, bytes]) -> Mapped:
    """One BullMQ job hash → the envelope fields (an empty hash: the job was removed)."""
    get = {k.decode("utf-8", "replace"): v for k, v in fields.items()}.get
    error_class, _ = split_error(_last_stack(get("stacktrace")))
    attempts = to_int(get("atm"))
    traceparent, tracestate = trace_carriers.bullmq(get("opts"), get("tm"))
    return Mapped(
        queue=queue,
        job_id=job_id,
        job_name=text(get("name")),
        attempts=attempts if attempts is not None else to_int(get("attemptsMade")),
        error_class=error_class,
        error_message=text(get("failedReason")),
        first_failed_at=iso_from_epoch(text(get("finishedOn"))),
        payload=_json_or_text(get("data")),
        traceparent=traceparent,
        tracestate=tracestate,
    )


def _last_stack(value: bytes | None) -> str | None:
    loaded = _json_or_text(value)
    if isinstance(loaded, list) and loaded and isinstance(loaded[-1], str):
        return loaded[-1]
    return None


def _json_or_text(value: bytes | None) -> Any:
    raw = text(value)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


class BullMQJudge:
    """A retried job (Bull Board, `job.retry()`) keeps its hash `<prefix>:<queue>:<id>`; removeOnFail
    (count or age) deletes the hash and trims from the oldest up. Gone with its hash while an older
    failed job is still there: deleted by hand."""

    def __init__(self, prefix: str, queue: str) -> None:
        self._prefix = prefix
        self._queue = queue

    async def why_gone(self, store: aioredis.Redis, key: str, left: Position, now_s: float) -> Reason | None:
        if await store.exists(job_key(self._prefix, self._queue, left.member_id)):
            return "retried"
        return "deleted" if await older_job_present(store, key, left, members_are_ids=True) else None


class BullMQMapper:
    members_are_ids = True

    def __init__(self, store: aioredis.Redis, prefix: str, queue: str) -> None:
        self._store = store
        self._prefix = prefix
        self._queue = queue
        self._source_key = f"{KIND}:{failed_key(prefix, queue)}"

    def member_id(self, member: bytes) -> str:
        return member.decode("utf-8", "replace")

    async def cap(self) -> StoreCap | None:
        """The newest failed job's `removeOnFail` count: BullMQ trims the failed set to it as jobs fail."""
        newest = cast(list[bytes], await self._store.zrevrange(failed_key(self._prefix, self._queue), 0, 0))
        if not newest:
            return None
        job = job_key(self._prefix, self._queue, self.member_id(newest[0]))
        limit = remove_on_fail(cast(bytes | None, await self._store.hget(job, "opts")))
        return StoreCap(limit, "removeOnFail of the jobs (read from the newest failed one)") if limit else None

    async def record(self, member: bytes, score: str, receipt: Receipt) -> KindRecord:
        job_id = self.member_id(member)
        fields = cast(dict[bytes, bytes], await self._store.hgetall(job_key(self._prefix, self._queue, job_id)))
        mapped = map_job(self._queue, job_id, fields)
        return KindRecord(self._source_key, self._queue, job_id, to_raw(mapped), receipt)


def remove_on_fail(opts: bytes | None) -> int | None:
    """`removeOnFail: 100` or `{count: 100}` in a job's opts: the failed jobs kept; None for true/false/age."""
    try:
        value = json.loads(opts) if opts else None
    except ValueError:
        return None
    if isinstance(value, dict):
        value = value.get("removeOnFail")
    if isinstance(value, dict):
        value = value.get("count")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def find_queues(store: aioredis.Redis, prefix: str) -> list[str]:
    """Queue names with a `<prefix>:<queue>:meta` hash (SCAN, never KEYS)."""
    head, tail = f"{prefix}:", ":meta"
    found = set()
    async for key in store.scan_iter(match=meta_match(prefix), count=500):
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        if name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail):
            found.add(name[len(head) : -len(tail)])
    return sorted(found)


def bullmq_source(
    name: str,
    store: aioredis.Redis,
    bridge: aioredis.Redis,
    *,
    prefix: str = "bull",
    queues: list[str] | None = None,
    lease_s: float = 60.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The failed sets of the listed queues, or of every queue SCAN finds when the list is empty."""

    async def discover() -> list[WatchedSet]:
        names = queues or await find_queues(store, prefix)
        return [
            WatchedSet(
                store,
                failed_key(prefix, queue),
                Cursor(bridge, f"{name}:{queue}", lease_s=lease_s),
                BullMQMapper(store, prefix, queue),
                name,
                clock,
                BullMQJudge(prefix, queue),
            )
            for queue in names
        ]

    return WatchedSource(name, discover)
