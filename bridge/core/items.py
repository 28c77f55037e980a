"""Sink-queue item ids, `<urgency>:<ms>:<idempotency key>:<digest>` (docs/design.md, section 5b).

Below the delivery layer so that what builds items (the hand-off, watched sources, resolves) and
what takes them (`bridge.stores.sink_queue`) share one spelling.
"""

from __future__ import annotations

import time

from bridge.core.models import Severity

BAND = 2**42  # ms timestamps stay below this until 2109
MAX_URGENCY = 3


def urgency(severity: Severity) -> int:
    """0 for critical … 3 for info: lower is taken first."""
    return MAX_URGENCY - severity.rank


def order_score(urgency_: int, ms: int) -> int:
    """The ready score: severity band first, then the hand-off time in ms."""
    if not 0 <= urgency_ <= MAX_URGENCY or not 0 <= ms < BAND:
        raise ValueError("urgency or ms out of range")
    return urgency_ * BAND + ms


def order_of(item: str) -> int:
    """The ready score of an item id (`<urgency>:<ms>:…`)."""
    urgency_, ms, _rest = item.split(":", 2)
    return order_score(int(urgency_), int(ms))


def item_id(severity: Severity, ms: int, idempotency_key: str, digest: str) -> str:
    return f"{urgency(severity)}:{ms}:{idempotency_key}:{digest}"


def now_ms() -> int:
    return int(time.time() * 1000)
