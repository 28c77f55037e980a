"""A dead-letter Redis stream read through a consumer group (docs/design.md, section 2b).

Consumable and at-least-once: an entry is XACKed only after the finish step; the pending entries
of a consumer that stopped are taken over with XAUTOCLAIM once idle for `min_idle_ms`, and a
restarted consumer first re-reads its own pending entries. An entry's `payload` field is the
dead letter as the producer wrote it; without one, the entry's fields are taken as a flat object.
The message id stands in for the job id when the dead letter carries none.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt

KIND = "redis_stream"
_JOB_ID_FIELDS = ("job_id", "task_id", "jid", "id")
LAG_CAP = 10_000


def entry_raw(entry_id: str, fields: dict[bytes, bytes]) -> bytes:
    """The raw dead letter of one stream entry, as normalize reads it."""
    payload = fields.get(b"payload")
    if payload is None:
        obj: dict[str, Any] = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in fields.items()}
        return _with_id(obj, entry_id)
    try:
        loaded = json.loads(payload)
    except (ValueError, RecursionError):
        return payload  # not JSON: normalize turns it into an unparseable dead letter
    return _with_id(_with_trace(loaded, fields), entry_id) if isinstance(loaded, dict) else payload


def _with_trace(obj: dict[str, Any], fields: dict[bytes, bytes]) -> dict[str, Any]:
    """A `traceparent` stream field beside `payload` wins over one inside the payload."""
    return {**obj, **trace_carriers.as_fields(trace_carriers.stream_fields(fields))}


def _with_id(obj: dict[str, Any], entry_id: str) -> bytes:
    if not any(obj.get(name) not in (None, "") for name in _JOB_ID_FIELDS):
        obj = {**obj, "job_id": entry_id}
    return json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()


def _job_id(raw: bytes, entry_id: str) -> str:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return entry_id
    if isinstance(obj, dict):
        for name in _JOB_ID_FIELDS:
            if obj.get(name) not in (None, ""):
                return str(obj[name])
    return entry_id


class RedisStreamSource:
    """One stream, one consumer group; this replica is one consumer in it."""

    def __init__(
        self,
        name: str,
        client: aioredis.Redis,
        *,
        stream: str,
        group: str,
        consumer: str,
        min_idle_ms: int = 60_000,
    ) -> None:
        self._name = name
        self._client = client
        self._stream = stream
        self._group = group
        self._consumer = consumer
        self._min_idle_ms = min_idle_ms
        self._ready = False
        self._own_pending_done = False
        self._own_from = "0"
        self._autoclaim_from = "0-0"
        self._source_key = f"{KIND}:{stream}"

    @property
    def name(self) -> str:
        return self._name

    async def claim(self) -> KindRecord | None:
        await self._ensure_group()
        found = await self._own_pending() or await self._autoclaim() or await self._read_new()
        if found is None:
            return None
        entry_id, fields = found
        raw = entry_raw(entry_id, fields)
        receipt = Receipt(source=self._name, token=entry_id)
        return KindRecord(self._source_key, self._stream, _job_id(raw, entry_id), raw, receipt, time.time())

    async def ack(self, receipt: Receipt) -> bool:
        if receipt.source != self._name:
            return False
        return bool(await self._client.xack(self._stream, self._group, receipt.token))

    async def depth(self) -> int:
        """Entries pending in the group plus entries not yet delivered to it (its lag)."""
        await self._ensure_group()
        for info in await self._client.xinfo_groups(self._stream):
            if _text(info.get("name")) == self._group:
                return int(info.get("pending") or 0) + await self._lag(info)
        return 0

    async def _lag(self, info: dict[str, Any]) -> int:
        """Entries not yet delivered to the group (`lag` from Redis 7; counted up to LAG_CAP before)."""
        if isinstance(info.get("lag"), int):
            return int(info["lag"])
        last = _text(info.get("last-delivered-id") or "0-0")
        return len(await self._client.xrange(self._stream, min=f"({last}", max="+", count=LAG_CAP) or [])

    async def rescan(self) -> list[str]:
        return []

    async def close(self) -> None:
        return None

    async def _ensure_group(self) -> None:
        if self._ready:
            return
        try:
            await self._client.xgroup_create(self._stream, self._group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._ready = True

    async def _own_pending(self) -> tuple[str, dict[bytes, bytes]] | None:
        """After a restart: this consumer's entries delivered before, never acked (read once per claim)."""
        if self._own_pending_done:
            return None
        reply = await self._client.xreadgroup(self._group, self._consumer, {self._stream: self._own_from}, count=1)
        found = _first(reply)
        if found is None:
            self._own_pending_done = True
        else:
            self._own_from = found[0]
        return found

    async def _autoclaim(self) -> tuple[str, dict[bytes, bytes]] | None:
        reply = await self._client.xautoclaim(
            self._stream, self._group, self._consumer, self._min_idle_ms, start_id=self._autoclaim_from, count=1
        )
        next_id, entries = _text(reply[0]), reply[1]
        self._autoclaim_from = next_id
        for entry_id, fields in entries:
            if fields is not None:
                return _text(entry_id), fields
        return None

    async def _read_new(self) -> tuple[str, dict[bytes, bytes]] | None:
        reply = await self._client.xreadgroup(self._group, self._consumer, {self._stream: ">"}, count=1)
        return _first(reply)


def _first(reply: Any) -> tuple[str, dict[bytes, bytes]] | None:
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            if fields:
                return _text(entry_id), fields
    return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
