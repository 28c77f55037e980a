"""Re-delivering undeliverable records' alerts: `undeliverable retry` and the console's Retry and Retry all
share `retry_one` and `retry_all` (oldest first; each record removed only once its sink has the alert)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from bridge.core.formats import format_of
from bridge.core.models import Alert
from bridge.delivery.downgrade import in_format
from bridge.delivery.send import Deliverer, Route
from bridge.stores.undeliverable_records import UNREADABLE, Stored, UndeliverableStore


async def retry_one(
    item: Stored, routes: dict[str, Route], deliverer: Deliverer, store: UndeliverableStore
) -> tuple[bool, str]:
    """Deliver one record's alert again (through the ledger); remove the record once its sink has it."""
    record = item.record
    if format_of(item.raw) > store.formats.reads:
        return False, f"skipped: written by a newer release (record format {format_of(item.raw)}); retry it there"
    if record.get("error") == UNREADABLE:
        if await store.requeue(item, lambda raw: in_format(raw, store.formats)):
            return True, "put back in its sink's queue, for a replica that reads it"
        return False, "skipped: the record holds only part of the queued item"
    route = routes.get(str(record.get("sink")))
    if route is None:
        return False, "skipped: no such sink is configured"
    try:
        alert = Alert.model_validate(record.get("alert"))
    except ValidationError:
        return False, "skipped: the record holds no alert to re-deliver"
    result = await deliverer.deliver(route, alert)
    if result.outcome == "undeliverable":
        return False, f"still failing: {result.error or ''}"
    removed = await store.remove(item)
    note = "" if removed else " (record was already removed)"
    return True, ("delivered" if result.outcome == "delivered" else "already delivered") + note


@dataclass(frozen=True)
class Retried:
    """What one record's retry did."""

    item: Stored
    ok: bool
    message: str


async def retry_all(
    stored: Sequence[Stored], routes: dict[str, Route], deliverer: Deliverer, store: UndeliverableStore
) -> list[Retried]:
    """`retry_one` for each record of `stored`, in order (callers pass them oldest first)."""
    done = []
    for item in stored:
        ok, message = await retry_one(item, routes, deliverer, store)
        done.append(Retried(item, ok, message))
    return done
