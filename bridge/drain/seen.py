"""Seen before, from the drain's side: record each failure of a cause and read its history first."""

from __future__ import annotations

import logging

from bridge.core.errors import REDIS_ERRORS
from bridge.core.models import DeadLetter
from bridge.core.seen_before import SeenBefore
from bridge.intake.cause import cause_key
from bridge.stores.seen_before import SeenBeforeStore

log = logging.getLogger(__name__)


async def record_seen(store: SeenBeforeStore | None, dead_letter: DeadLetter) -> SeenBefore | None:
    """Record this failure of its cause; the cause's history before it. When Redis fails here the alert
    goes without history (the hand-off that follows waits Redis out, as it always did)."""
    if store is None:
        return None
    try:
        return await store.seen(cause_key(dead_letter.last_error, dead_letter.parse_error))
    except REDIS_ERRORS as exc:
        log.warning("seen-before not recorded (%s); the alert goes without it", type(exc).__name__)
        return None
