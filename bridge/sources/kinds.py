"""The plug-in part of the other DLQ kinds: claim a record with an opaque receipt, ack it.

A reader is what a kind implements; `bridge.sources.kind_port.KindPort` puts it behind the one
source port, which does the bookkeeping (in-flight list, deaths, acknowledgement after the hand-off).

Two families (docs/design.md, section 2b):

- watched stores the job system owns (Sidekiq dead set, BullMQ failed set, RQ failed registry):
  nothing is ever removed or changed there; the receipt is a lease on the record in a durable
  per-source cursor, and `ack` advances that cursor;
- consumable stores (a Redis Streams consumer group, a RabbitMQ queue, an SQS queue): the receipt
  is the stream entry id, the delivery tag or the receipt handle, and `ack` is XACK, basic.ack or
  DeleteMessage. A record never acked comes back (XAUTOCLAIM, redelivery, visibility timeout).

`KindRecord.raw` is an envelope-shaped JSON object built from the native record (or the native
bytes themselves when they could not be mapped), so `bridge.intake.chain.normalize` applies the same
redaction and bad-input rules as for `dead_letter:*` lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from bridge.core.claimed import Receipt

__all__ = ["KindReader", "KindRecord", "Receipt"]


@dataclass(frozen=True)
class KindRecord:
    """One dead job claimed from a kind source."""

    source_key: str  # "<kind>:<store>", e.g. "sidekiq:dead", "bullmq:bull:orders:failed"
    queue: str  # the route's queue: the job's queue, the original queue in x-death, the stream/SQS queue
    job_id: str
    raw: bytes  # envelope-shaped JSON, or the native bytes when they could not be mapped
    receipt: Receipt
    claimed_at: float = field(default=0.0, compare=False)
    attempts: int | None = field(default=None, compare=False)  # when the raw names none (SQS: its receive count)


class KindReader(Protocol):
    """What every kind reader offers; `name` is unique among the configured sources."""

    @property
    def name(self) -> str: ...

    async def claim(self) -> KindRecord | None:
        """The next record not yet finished by any replica, leased to this one; None when none is ready."""
        ...

    async def ack(self, receipt: Receipt) -> bool:
        """The record is finished (alerted and archived): never hand it out again."""
        ...

    async def depth(self) -> int:
        """Records not yet finished (watched) or waiting (consumable), for /metrics and `check`."""
        ...

    async def rescan(self) -> list[str]:
        """Stores found since the last call (new BullMQ / RQ queues); consumable kinds have one."""
        ...

    async def close(self) -> None: ...
