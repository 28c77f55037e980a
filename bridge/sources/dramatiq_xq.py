"""Dramatiq's dead-letter queues on its Redis broker: `<namespace>:<queue>.XQ` + `.XQ.msgs`.

Watched, never changed (docs/design.md, section 2b). Dramatiq's `nack` moves a message that ran out
of retries into the sorted set `<namespace>:<queue>.XQ` (member: the broker's `redis_message_id`,
score: the time it died, in ms) and its encoded body into the hash `<namespace>:<queue>.XQ.msgs`.
The body is Dramatiq's JSON message (`actor_name`, `args`, `kwargs`, `options.retries`,
`options.traceback`) as it was last enqueued: `retries` counts the failures before the last one and
`traceback` is the previous attempt's (a message that died on its first attempt carries no error at
all). It is read as JSON text, bounded (MAX_MESSAGE_BYTES), never decoded by Dramatiq itself.
Dramatiq trims a dead-letter queue only by age: its broker's maintenance drops messages older than
`dead_message_ttl` (7 days by default), never by count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, cast

import redis.asyncio as aioredis

from bridge.core.names import as_bytes
from bridge.core.resolves import Reason
from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import Mapped, iso_from_epoch, split_error, to_int, to_raw
from bridge.sources.watched import StoreCap, WatchedSet, WatchedSource
from bridge.stores.cursor import Cursor, Position

KIND = "dramatiq"
MAX_MESSAGE_BYTES = 1024 * 1024  # a larger body is not read: the alert names the message only
MAX_TRACEBACK_CHARS = 64 * 1024
TTL_MARGIN_S = 60.0  # a message gone this close to its dead_message_ttl may be maintenance's
DEFAULT_DEAD_MESSAGE_TTL_S = 7 * 24 * 3600.0  # Dramatiq's DEFAULT_DEAD_MESSAGE_TTL
_GLOB = str.maketrans({c: f"\\{c}" for c in "*?[]\\"})


# Dramatiq's own keys: read, never written.
def dead_key(namespace: str, queue: str) -> str:
    return f"{namespace}:{queue}.XQ"


def dead_messages_key(namespace: str, queue: str) -> str:
    return f"{namespace}:{queue}.XQ.msgs"


def dead_match(namespace: str) -> str:
    """SCAN pattern finding every dead-letter queue of a namespace."""
    return f"{namespace.translate(_GLOB)}:*.XQ"


def traceback_error(traceback: Any) -> tuple[str | None, str | None]:
    """The `Class: message` line that ends the traceback Dramatiq's Retries middleware stores."""
    if not isinstance(traceback, str):
        return None, None
    lines = [ln for ln in traceback[-MAX_TRACEBACK_CHARS:].splitlines() if ln.strip() and not ln.startswith(" ")]
    return split_error(lines[-1].strip()) if lines else (None, None)


def map_message(queue: str, redis_id: str, body: bytes | None, died_ms: str) -> Mapped:
    """One dead message (`redis_id`: its member in the XQ); a body that is not Dramatiq's JSON object
    gives a sparse record. The job id is Dramatiq's `message_id`, the one its logs show."""
    message = _json_object(body)
    message_id = message.get("message_id")
    options = message.get("options")
    options = options if isinstance(options, dict) else {}
    error_class, error_message = traceback_error(options.get("traceback"))
    actor = message.get("actor_name")
    traceparent, tracestate = trace_carriers.dramatiq(options)
    return Mapped(
        queue=queue,
        job_id=message_id if isinstance(message_id, str) and message_id else redis_id,
        job_name=actor if isinstance(actor, str) and actor else None,
        attempts=_attempts(message, options),
        error_class=error_class,
        error_message=error_message,
        first_failed_at=iso_from_epoch(died_ms),  # Dramatiq keeps the time of death only
        payload=_payload(message, body),
        traceparent=traceparent,
        tracestate=tracestate,
    )


def _attempts(message: dict[str, Any], options: dict[str, Any]) -> int | None:
    """The body is the one of the message's last enqueue: `retries` counts the failures before
    the last one, which is not recorded."""
    if not message:
        return None
    retries = to_int(options.get("retries"))
    return (retries or 0) + 1


def _json_object(body: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _payload(message: dict[str, Any], body: bytes | None) -> Any:
    if message:
        return {"args": message.get("args"), "kwargs": message.get("kwargs")}
    return body.decode("utf-8", "replace") if body else None


class DramatiqJudge:
    """Dramatiq's maintenance drops only messages older than `dead_message_ttl`; a message gone
    before that was requeued or deleted by hand. The two look alike (`broker.enqueue` gives a
    requeued message a new Redis id), and both resolve: the reason said is `retried`."""

    def __init__(self, dead_message_ttl_s: float) -> None:
        self._horizon_s = dead_message_ttl_s - min(TTL_MARGIN_S, dead_message_ttl_s / 10)

    async def why_gone(self, store: aioredis.Redis, key: str, left: Position, now_s: float) -> Reason | None:
        died_s = float(left.score) / 1000
        return None if now_s - died_s >= self._horizon_s else "retried"


class DramatiqMapper:
    members_are_ids = True

    def __init__(
        self, store: aioredis.Redis, namespace: str, queue: str, ttl_s: float, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._queue = queue
        self._key = dead_key(namespace, queue)
        self._messages = dead_messages_key(namespace, queue)
        self._source_key = f"{KIND}:{self._key}"
        self._ttl_s = ttl_s
        self._clock = clock

    def member_id(self, member: bytes) -> str:
        return member.decode("utf-8", "replace")

    async def cap(self) -> StoreCap | None:
        """Dramatiq drops dead messages by age (`dead_message_ttl`), never by count: the cap is the TTL,
        and how far along it is the age of the oldest dead message (None: the queue is empty)."""
        oldest = cast(list[tuple[bytes, float]], await self._store.zrange(self._key, 0, 0, withscores=True))
        if not oldest:
            return None
        age_s = max(0, int(self._clock() - float(oldest[0][1]) / 1000))
        setting = "the RedisBroker's dead_message_ttl (dead_message_ttl_s of [[sources.dramatiq]])"
        return StoreCap(limit=int(self._ttl_s), setting=setting, unit="seconds", level=age_s)

    async def record(self, member: bytes, score: str, receipt: Receipt) -> KindRecord:
        redis_id = self.member_id(member)
        size = int(await self._store.hstrlen(self._messages, redis_id))
        body = await self._store.hget(self._messages, redis_id) if 0 < size <= MAX_MESSAGE_BYTES else None
        mapped = map_message(self._queue, redis_id, as_bytes(body) if body is not None else None, score)
        return KindRecord(self._source_key, mapped.queue, mapped.job_id, to_raw(mapped), receipt)


async def find_queues(store: aioredis.Redis, namespace: str) -> list[str]:
    """Queue names with a dead-letter sorted set `<namespace>:<queue>.XQ` (SCAN, never KEYS)."""
    head, tail = f"{namespace}:", ".XQ"
    found = set()
    async for key in store.scan_iter(match=dead_match(namespace), count=500):
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        if name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail):
            found.add(name[len(head) : -len(tail)])
    return sorted(found)


def dramatiq_source(
    name: str,
    store: aioredis.Redis,
    bridge: aioredis.Redis,
    *,
    namespace: str = "dramatiq",
    queues: list[str] | None = None,
    dead_message_ttl_s: float = DEFAULT_DEAD_MESSAGE_TTL_S,
    lease_s: float = 60.0,
    clock: Callable[[], float] = time.time,
) -> WatchedSource:
    """The dead-letter queues of the listed queues, or of every queue SCAN finds when empty."""

    async def discover() -> list[WatchedSet]:
        names = queues or await find_queues(store, namespace)
        return [
            WatchedSet(
                store,
                dead_key(namespace, queue),
                Cursor(bridge, f"{name}:{queue}", lease_s=lease_s),
                DramatiqMapper(store, namespace, queue, dead_message_ttl_s, clock),
                name,
                clock,
                DramatiqJudge(dead_message_ttl_s),
            )
            for queue in names
        ]

    return WatchedSource(name, discover)
