"""Records of deliveries that exhausted their retries (`dlq_bridge:undeliverable`).

Each record is one JSON object, LPUSHed (newest left): the sink, what went
wrong, the idempotency key, the rendered body (never a secret URL or key: the
sinks leave those out of `render()`), and the whole Alert so that
`dlq-bridge undeliverable retry` can deliver it again.

The list is capped (`[delivery] undeliverable_max`): a sink broken through a storm
would otherwise grow it by one rendered alert per job until Redis runs out of
memory. The oldest records are trimmed, counted and logged; the entries themselves
are archived whatever their deliveries did, so trimming drops a delivery record,
never a dead letter.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

from bridge.core.formats import RecordFormat
from bridge.core.metrics import Metrics
from bridge.core.models import Alert
from bridge.stores import keys
from bridge.stores.sink_queue import SinkQueue

log = logging.getLogger(__name__)

TRIM_LOG_EVERY_S = 60.0
MAX_ITEM_CHARS = 1_000_000
"""An unreadable queued item is kept whole up to this (a queued alert's envelope is bounded far below it)."""
UNREADABLE = "unreadable queued alert"
NAME = keys.UNDELIVERABLE  # the list's name, for what `peek` prints


@dataclass(frozen=True)
class Failure:
    """What a delivery's last attempt ended with."""

    attempts: int
    status: int | None
    error: str


def unreadable_record(sink: str, item: str, body: str) -> dict[str, Any]:
    """A queued item its replica could not read, kept whole (up to `MAX_ITEM_CHARS`) so that
    `undeliverable retry` puts it back in its sink's queue (`requeue`), where a replica that reads
    it delivers it."""
    return {"sink": sink, "error": UNREADABLE, "item": item, "at": time.time(),
            "body": {"raw": body[:MAX_ITEM_CHARS]}, "whole": len(body) <= MAX_ITEM_CHARS}


def retryable(record: dict[str, Any]) -> bool:
    """Whether `undeliverable retry` can act on a record: it holds an alert, or a whole queued item."""
    whole = isinstance(record.get("item"), str) and record.get("whole", True) is not False
    return isinstance(record.get("alert"), dict) or (record.get("error") == UNREADABLE and whole)


def build_record(
    sink: str, sink_type: str, alert: Alert, body: dict[str, Any], failure: Failure,
    formats: RecordFormat | None = None,
) -> dict[str, Any]:
    dl = alert.dead_letter
    return {
        "sink": sink,
        "sink_type": sink_type,
        "status": failure.status,
        "error": failure.error,
        "idempotency_key": alert.idempotency_key,
        "attempts": failure.attempts,
        "at": time.time(),
        "queue": dl.queue,
        "job_id": dl.job_id,
        "source_key": dl.source_key,
        "raw_digest": dl.raw_digest,
        "body": body,
        "alert": (formats or RecordFormat()).alert_dict(alert),
    }


@dataclass(frozen=True)
class Stored:
    """One record as stored: the exact string (for LREM) and its parsed form."""

    raw: str
    record: dict[str, Any]


class UndeliverableStore:
    """LPUSH (then trim to `keep`, when given), list and remove records; keeps the depth gauge current."""

    def __init__(
        self, client: redis.Redis, metrics: Metrics | None = None, keep: int | None = None,
        formats: RecordFormat | None = None,
    ) -> None:
        self._redis = client
        self.formats = formats or RecordFormat()
        self._metrics = metrics
        self._keep = keep
        self._unlogged_trims = 0
        self._trim_logged_at = float("-inf")

    async def push(self, record: dict[str, Any]) -> None:
        raw = self.formats.write(json.dumps(record, ensure_ascii=False))
        if self._keep is None:
            self._gauge(int(await self._redis.lpush(keys.UNDELIVERABLE, raw)))
            return
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(keys.UNDELIVERABLE, raw)
            pipe.ltrim(keys.UNDELIVERABLE, 0, self._keep - 1)
            depth, _ = await pipe.execute()
        self._trimmed(int(depth) - self._keep)
        self._gauge(min(int(depth), self._keep))

    async def depth(self) -> int:
        depth = int(await self._redis.llen(keys.UNDELIVERABLE))
        self._gauge(depth)
        return depth

    async def records(self, limit: int | None = None) -> list[Stored]:
        """Newest first; unparseable records are returned with an empty dict."""
        end = -1 if limit is None else limit - 1
        raws = await self._redis.lrange(keys.UNDELIVERABLE, 0, end)
        return [_parse(_text(raw)) for raw in raws]

    async def remove(self, stored: Stored) -> bool:
        """Remove exactly this record (one LREM); False if someone else already did."""
        removed = await self._redis.lrem(keys.UNDELIVERABLE, 1, stored.raw)
        await self.depth()
        return bool(removed)

    async def requeue(self, stored: Stored, convert: Callable[[str], str | None] = lambda raw: raw) -> bool:
        """Put an unreadable item's record back in its sink's queue, whole (through `convert`: in the
        format the fleet writes), then remove the record (False: the record holds no whole item).
        A repeat puts the same item id: queued once."""
        record = stored.record
        raw = record.get("body", {}).get("raw") if isinstance(record.get("body"), dict) else None
        sink, item = record.get("sink"), record.get("item")
        if not (isinstance(raw, str) and isinstance(sink, str) and isinstance(item, str)):
            return False
        if not record.get("whole", _parses(raw)):  # 0.1.0 kept 10,000 bytes and said nothing: whole if it parses
            return False
        await SinkQueue(self._redis, sink).put(item, convert(raw) or raw)
        await self.remove(stored)
        return True

    def _trimmed(self, count: int) -> None:
        """Counted at once; logged at most once a minute (a storm trims once per job)."""
        if count <= 0:
            return
        if self._metrics is not None:
            self._metrics.undeliverable_trimmed.inc(count)
        self._unlogged_trims += count
        now = time.monotonic()
        if now - self._trim_logged_at >= TRIM_LOG_EVERY_S:
            log.warning("dlq_bridge:undeliverable is at delivery.undeliverable_max (%d): %d oldest record(s) "
                        "trimmed", self._keep, self._unlogged_trims)
            self._unlogged_trims, self._trim_logged_at = 0, now

    def _gauge(self, depth: int) -> None:
        if self._metrics is not None:
            self._metrics.undeliverable_depth.set(depth)


def _text(raw: bytes | str) -> str:
    return raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")


def _parses(raw: str) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def _parse(raw: str) -> Stored:
    try:
        record = json.loads(raw)
    except ValueError:
        record = {}
    return Stored(raw, record if isinstance(record, dict) else {})
