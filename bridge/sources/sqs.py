"""An SQS dead-letter queue (docs/design.md, section 2b).

Consumable and at-least-once: a received message stays invisible for `visibility_timeout_s`;
it is deleted only after the finish step, so a replica that stops before comes back to the
queue when the timeout ends. The body is the dead letter as the producer wrote it. The message
id stands in for the job id when the body carries none, and `ApproximateReceiveCount` minus this
receive stands in for the attempts (it also counts earlier receives by a bridge that stopped),
and `ApproximateFirstReceiveTimestamp` (the first attempt) for `first_failed_at` when the body has
neither.

boto3 is synchronous: each call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlsplit

from bridge.sources import trace_carriers
from bridge.sources.kinds import KindRecord, Receipt
from bridge.sources.mapping import iso_from_epoch

KIND = "sqs"
_JOB_ID_FIELDS = ("job_id", "task_id", "jid", "id")
_FAILED_AT_FIELDS = ("first_failed_at", "failed_at", "failedAt")


def queue_name(queue_url: str) -> str:
    """`https://sqs.eu-west-1.amazonaws.com/123/orders-dlq` → `orders-dlq`."""
    return urlsplit(queue_url).path.rstrip("/").rsplit("/", 1)[-1] or queue_url


def message_raw(message: dict[str, Any]) -> tuple[bytes, str]:
    """The raw dead letter of one message and its job id.

    The same bytes on every receive (the drain tracks an entry's deaths by their digest), so the
    receive count, which grows with each receive, is not in them: see `receive_attempts`."""
    body = message.get("Body") or ""
    message_id = str(message.get("MessageId") or "")
    try:
        loaded = json.loads(body)
    except (ValueError, RecursionError):
        return body.encode("utf-8", "surrogateescape"), message_id
    if not isinstance(loaded, dict):
        return body.encode(), message_id
    job_id = next((str(loaded[n]) for n in _JOB_ID_FIELDS if loaded.get(n) not in (None, "")), None)
    obj = dict(loaded)
    if job_id is None:
        obj["job_id"] = job_id = message_id
    obj.update(trace_carriers.as_fields(trace_carriers.sqs(message, loaded)))
    attributes = message.get("Attributes", {})
    if not any(obj.get(name) for name in _FAILED_AT_FIELDS):
        first = iso_from_epoch(attributes.get("ApproximateFirstReceiveTimestamp"))
        if first is not None:
            obj["first_failed_at"] = first
    return json.dumps(obj, sort_keys=True, ensure_ascii=False).encode(), job_id


def receive_attempts(message: dict[str, Any]) -> int | None:
    """`ApproximateReceiveCount` minus this receive: the attempts, when the body names none."""
    received = _int(message.get("Attributes", {}).get("ApproximateReceiveCount"))
    return None if received is None else max(received - 1, 1)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


class SqsSource:
    """One SQS queue; `client` is a boto3 SQS client (built by the caller from the settings)."""

    def __init__(self, name: str, client: Any, *, queue_url: str, visibility_timeout_s: int = 60) -> None:
        self._name = name
        self._client = client
        self._queue_url = queue_url
        self._visibility = visibility_timeout_s
        self._queue = queue_name(queue_url)
        self._source_key = f"{KIND}:{self._queue}"

    @property
    def name(self) -> str:
        return self._name

    async def claim(self) -> KindRecord | None:
        reply = await asyncio.to_thread(
            self._client.receive_message,
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=1,
            VisibilityTimeout=self._visibility,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = reply.get("Messages") or []
        if not messages:
            return None
        message = messages[0]
        raw, job_id = message_raw(message)
        receipt = Receipt(source=self._name, token=str(message["ReceiptHandle"]))
        attempts = receive_attempts(message)
        return KindRecord(self._source_key, self._queue, job_id, raw, receipt, time.time(), attempts)

    async def ack(self, receipt: Receipt) -> bool:
        if receipt.source != self._name:
            return False
        from botocore.exceptions import ClientError

        try:
            await asyncio.to_thread(self._client.delete_message, QueueUrl=self._queue_url, ReceiptHandle=receipt.token)
        except ClientError:  # e.g. the receipt handle expired: the message is visible again, for another receive
            return False
        return True

    async def depth(self) -> int:
        """Messages visible plus messages received and not yet deleted."""
        reply = await asyncio.to_thread(
            self._client.get_queue_attributes,
            QueueUrl=self._queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
        attrs = reply.get("Attributes", {})
        names = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")
        return sum(_int(attrs.get(n)) or 0 for n in names)

    async def rescan(self) -> list[str]:
        return []

    async def close(self) -> None:
        return None


def sqs_client(*, region: str, endpoint_url: str | None = None) -> Any:
    """A boto3 SQS client (credentials from the usual AWS chain: environment, profile, role)."""
    import boto3  # optional dependency: the `kinds` extra

    return boto3.client("sqs", region_name=region, endpoint_url=endpoint_url)
