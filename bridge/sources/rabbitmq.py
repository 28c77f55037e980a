"""A RabbitMQ queue bound to a dead-letter exchange, e.g. Celery's (docs/design.md, section 2b).

Consumable and at-least-once: messages are fetched with manual acknowledgement and acked only
after the finish step; a message whose consumer's connection ends unacked is redelivered by the
broker. Mapping: the original queue from `x-first-death-queue` (else the oldest `x-death` entry),
the job id and task name from Celery's `id` and `task` headers (else the message's
correlation/message id), attempts from Celery's `retries` plus the `x-death` count, the time of
the first death as `first_failed_at`, and the reason (`rejected`, `expired`, `maxlen`,
`delivery_limit`) as the error. A Celery message carries no exception text: that lives in the
result backend, which the bridge does not read. A message without a `task` header is taken as
the dead letter itself (its JSON body), with the x-death facts filling the gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import Mapped, to_int, to_raw

KIND = "rabbitmq"


def first_death(headers: dict[str, Any]) -> dict[str, Any]:
    """The x-death entry of the first death (RabbitMQ lists the most recent first)."""
    deaths = [d for d in headers.get("x-death") or [] if isinstance(d, dict)]
    first_queue = _str(headers.get("x-first-death-queue"))
    for death in deaths:
        if first_queue and _str(death.get("queue")) == first_queue:
            return death
    return deaths[-1] if deaths else {}


def _str(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) and value else None


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return None


def death_facts(headers: dict[str, Any], dlq: str) -> tuple[str, int | None, str, str | None]:
    """(original queue, x-death count, reason, first death time)."""
    death = first_death(headers)
    queue = _str(headers.get("x-first-death-queue")) or _str(death.get("queue")) or dlq
    reason = _str(headers.get("x-first-death-reason")) or _str(death.get("reason")) or "dead-lettered"
    return queue, to_int(death.get("count")), reason, _iso(death.get("time"))


def map_celery(headers: dict[str, Any], body: bytes, dlq: str, message_id: str) -> Mapped:
    queue, count, reason, died_at = death_facts(headers, dlq)
    retries = to_int(headers.get("retries")) or 0
    traceparent, tracestate = trace_carriers.celery_headers(headers)
    return Mapped(
        queue=queue,
        job_id=_str(headers.get("id")) or message_id,
        job_name=_str(headers.get("task")),
        attempts=retries + (count or 1),
        error_class=None,
        error_message=f"message {reason} in queue {queue} and dead-lettered to {dlq}",
        first_failed_at=died_at,
        payload=_body(body),
        traceparent=traceparent,
        tracestate=tracestate,
    )


def _body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return body[:4096].decode("utf-8", "replace")


def plain_raw(headers: dict[str, Any], body: bytes, dlq: str, message_id: str) -> tuple[bytes, str, str]:
    """A non-Celery message: its JSON object body is the dead letter; x-death fills the gaps."""
    queue, count, reason, died_at = death_facts(headers, dlq)
    loaded = _body(body)
    if not isinstance(loaded, dict):
        return body, queue, message_id
    obj = dict(loaded)
    obj.setdefault("job_id", message_id)
    if count is not None:
        obj.setdefault("attempts", count)
    if died_at:
        obj.setdefault("first_failed_at", died_at)
    obj.setdefault("last_error", f"message {reason} in queue {queue}")
    job_id = str(obj.get("job_id") or message_id)
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode(), queue, job_id


def message_record(headers: dict[str, Any], body: bytes, dlq: str, message_id: str, receipt: Receipt) -> KindRecord:
    source_key = f"{KIND}:{dlq}"
    if _str(headers.get("task")):
        mapped = map_celery(headers, body, dlq, message_id)
        return KindRecord(source_key, mapped.queue, mapped.job_id, to_raw(mapped), receipt, time.time())
    raw, queue, job_id = plain_raw(headers, body, dlq, message_id)
    return KindRecord(source_key, queue, job_id, raw, receipt, time.time())


class RabbitMQSource:
    """One dead-letter queue; this replica holds one connection and one channel to it."""

    def __init__(self, name: str, url: str, *, queue: str, prefetch: int = 10) -> None:
        self._name = name
        self._url = url
        self._queue_name = queue
        self._prefetch = prefetch
        self._connection: Any = None
        self._queue: Any = None
        self._held: dict[str, Any] = {}
        self._epoch = 0

    @property
    def name(self) -> str:
        return self._name

    async def claim(self) -> KindRecord | None:
        try:
            queue = await self._open()
            message = await queue.get(no_ack=False, fail=False)
        except Exception:
            await self._drop_connection()  # a broken connection or channel: the next claim connects afresh
            raise
        if message is None:
            return None
        token = f"{self._epoch}:{message.delivery_tag}"
        self._held[token] = message
        message_id = _str(message.message_id) or _str(message.correlation_id) or f"tag-{token}"
        receipt = Receipt(source=self._name, token=token)
        return message_record(dict(message.headers or {}), message.body, self._queue_name, message_id, receipt)

    async def ack(self, receipt: Receipt) -> bool:
        """Ack on the channel that delivered it; a receipt from a closed channel is stale (redelivered)."""
        message = self._held.pop(receipt.token, None)
        if receipt.source != self._name or message is None:
            return False
        from aio_pika.exceptions import AMQPError

        try:
            await message.ack()
        except AMQPError:  # the channel closed since: the broker redelivers the message
            return False
        return True

    async def depth(self) -> int:
        queue = await self._open()
        declared = await queue.declare()
        return int(declared.message_count or 0) + len(self._held)

    async def rescan(self) -> list[str]:
        return []

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
        self._connection = self._queue = None
        self._held.clear()

    async def _drop_connection(self) -> None:
        """Forget a connection that failed (its unacked messages go back to the queue at the broker)."""
        connection, self._connection, self._queue = self._connection, None, None
        self._held.clear()
        if connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), timeout=1.0)

    async def _open(self) -> Any:
        if self._queue is not None and self._connection is not None and not self._connection.is_closed:
            return self._queue
        import aio_pika  # optional dependency: the `kinds` extra

        self._held.clear()
        self._epoch += 1
        self._connection = await aio_pika.connect(self._url)
        channel = await self._connection.channel()
        await channel.set_qos(prefetch_count=self._prefetch)
        self._queue = await channel.get_queue(self._queue_name, ensure=True)
        return self._queue
