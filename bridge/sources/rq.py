"""RQ's failed jobs: `rq:failed:<queue>` (FailedJobRegistry; score = expiry of the entry) + `rq:job:<id>`.

Watched, never changed: rq-dashboard or `rq requeue` is where operators retry
(docs/design.md, section 2b). Only safe fields are read, by name (HMGET): `description`,
`origin`, `ended_at`, `number_of_retries`, `meta`. The job's `data` is a pickle and is never read,
let alone unpickled; `meta` is read only for its trace context and only when it is JSON (RQ's
JSONSerializer): a pickled `meta` (the default serializer) is never decoded.
RQ 2–3 keep the exception in the results stream `rq:results:<id>`
(entries of type 2 = failed, `exc_string` zlib-compressed and base64-encoded); older RQ keeps
`exc_info` in the job hash.
"""

from __future__ import annotations

import base64
import binascii
import time
import zlib
from collections.abc import Callable
from typing import cast

import redis.asyncio as aioredis

from bridge.core.resolves import Reason
from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import Mapped, iso_from_epoch, split_error, text, to_int, to_raw
from bridge.sources.watched import WatchedSet, WatchedSource
from bridge.stores.cursor import Cursor, Position

KIND = "rq"
EXPIRY_MARGIN_S = 60.0  # an entry this close to its expiry may have been cleaned up
FAILED = b"2"
MAX_EXC_BYTES = 64 * 1024
_FIELDS = ("description", "origin", "ended_at", "number_of_retries", "exc_info", "meta")


# RQ's own keys: read, never written.
RQ_QUEUES = "rq:queues"


def failed_key(queue: str) -> str:
    return f"rq:failed:{queue}"


def job_key(job_id: str) -> str:
    return f"rq:job:{job_id}"


def results_key(job_id: str) -> str:
    return f"rq:results:{job_id}"



def function_of(description: str | None) -> str | None:
    """`app.tasks.charge(7, token='x')` → `app.tasks.charge`."""
    if not description:
        return None
    return description.split("(", 1)[0].strip() or None


def exc_text(encoded: bytes | None) -> str | None:
    """An RQ `exc_string` (zlib + base64), inflated to at most MAX_EXC_BYTES; None when invalid."""
    if not encoded:
        return None
    try:
        packed = base64.b64decode(encoded, validate=False)
        inflated = zlib.decompressobj().decompress(packed, MAX_EXC_BYTES)
    except (binascii.Error, ValueError, zlib.error):
        return None
    return inflated.decode("utf-8", "replace")


def last_line(traceback: str | None) -> str | None:
    """The `Class: message` line that ends a Python traceback."""
    lines = [line for line in (traceback or "").splitlines() if line.strip() and not line.startswith(" ")]
    return lines[-1].strip() if lines else None


def map_job(queue: str, job_id: str, fields: dict[str, bytes | None], failures: list[dict[bytes, bytes]]) -> Mapped:
    traceback = exc_text(failures[-1].get(b"exc_string")) if failures else text(fields.get("exc_info"))
    error_class, message = split_error(last_line(traceback))
    retries = to_int(fields.get("number_of_retries"))
    first_end = text(failures[0].get(b"execution_ended_at")) if failures else None
    description = text(fields.get("description"))
    traceparent, tracestate = trace_carriers.rq_meta(fields.get("meta"))
    return Mapped(
        queue=text(fields.get("origin")) or queue,
        job_id=job_id,
        job_name=function_of(description),
        attempts=retries + 1 if retries is not None else (len(failures) or None),
        error_class=error_class,
        error_message=message,
        first_failed_at=iso_from_epoch(first_end) or text(fields.get("ended_at")),
        payload=description,
        traceparent=traceparent,
        tracestate=tracestate,
    )


class RQJudge:
    """The registry's score is the entry's expiry (now + failure_ttl; negative: never); RQ's cleanup
    removes expired entries only. Gone before its expiry: requeued (rq-dashboard, `rq requeue`,
    `registry.requeue`) if the job hash is still there, else deleted by hand."""

    async def why_gone(self, store: aioredis.Redis, key: str, left: Position, now_s: float) -> Reason | None:
        expiry = float(left.score)
        if 0 <= expiry <= now_s + EXPIRY_MARGIN_S:
            return None
        return "retried" if await store.exists(job_key(left.member_id)) else "deleted"


class RQMapper:
    members_are_ids = True

    def __init__(self, store: aioredis.Redis, queue: str) -> None:
        self._store = store
        self._queue = queue
        self._source_key = f"{KIND}:{failed_key(queue)}"

    def member_id(self, member: bytes) -> str:
        return member.decode("utf-8", "replace")

    async def cap(self) -> None:
        """RQ drops failed jobs by their `failure_ttl`, never by count."""
        return None

    async def record(self, member: bytes, score: str, receipt: Receipt) -> KindRecord:
        job_id = self.member_id(member)
        values = cast(list[bytes | None], await self._store.hmget(job_key(job_id), list(_FIELDS)))
        fields = dict(zip(_FIELDS, values, strict=True))
        results = await self._store.xrange(results_key(job_id), count=100)
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], results)
        failures = [entry for _, entry in entries if entry and entry.get(b"type") == FAILED]
        mapped = map_job(self._queue, job_id, fields, failures)
        return KindRecord(self._source_key, mapped.queue, job_id, to_raw(mapped), receipt)


async def find_queues(store: aioredis.Redis) -> list[str]:
    """Queue names RQ registered in `rq:queues` (members `rq:queue:<name>`)."""
    members = await store.smembers(RQ_QUEUES)
    names = (m.decode("utf-8", "replace") if isinstance(m, bytes) else str(m) for m in members)
    return sorted(n.removeprefix("rq:queue:") for n in names if n.startswith("rq:queue:"))


def rq_source(
    name: str,
    store: aioredis.Redis,
    bridge: aioredis.Redis,
    *,
    queues: list[str] | None = None,
    lease_s: float = 60.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The failed registries of the listed queues, or of every queue in `rq:queues` when empty."""

    async def discover() -> list[WatchedSet]:
        names = queues or await find_queues(store)
        return [
            WatchedSet(
                store,
                failed_key(queue),
                Cursor(bridge, f"{name}:{queue}", lease_s=lease_s),
                RQMapper(store, queue),
                name,
                clock,
                RQJudge(),
            )
            for queue in names
        ]

    return WatchedSource(name, discover)
