"""Records rewritten for an older replica that joined (bridge.core.formats; docs/operations.md, "Upgrades").

A replica writes the newest record format every live replica reads. When a replica of an older
release joins (a rollback, or an old replica restarted mid-upgrade), what this replica wrote before
it noticed is of a format the newcomer cannot read: the queued alerts of its sinks and the first
alerts of their open groups. While the fleet writes an older format than this replica reads, each
sink worker rewrites those records in the format written now, so that nothing waits for a newer
replica once the last one is gone. An item that would not parse is left as it is (and counted).
"""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import ValidationError

from bridge.core.formats import RecordFormat, unstamp
from bridge.core.models import Alert
from bridge.core.resolves import parse_resolve
from bridge.stores.sink_queue import SinkQueue

log = logging.getLogger(__name__)


class FirstAlerts(Protocol):
    """The part of a sink's groups this needs (bridge.stores.groups.Grouper)."""

    async def newer_firsts(self, fmt: int) -> list[tuple[str, str]]: ...

    async def rewrite_first(self, group: str, first: str) -> bool: ...


def in_format(body: str, formats: RecordFormat) -> str | None:
    """A queued alert or resolve in the format written now; None when it does not parse."""
    if parse_resolve(body) is not None:
        return formats.write(unstamp(body))
    try:
        return formats.alert_json(Alert.model_validate_json(body))
    except (ValidationError, ValueError):
        return None


async def downgrade(queue: SinkQueue, groups: FirstAlerts | None, formats: RecordFormat) -> int:
    """Rewrite this sink's queued items and open groups' first alerts newer than the format written
    now; returns how many were rewritten (0 when the fleet writes what this replica reads)."""
    fmt = formats.writes
    if fmt >= formats.reads:
        return 0
    rewritten = 0
    async for item, body in queue.newer_than(fmt):
        older = in_format(body, formats)
        if older is not None and await queue.rewrite(item, older, fmt):
            rewritten += 1
    if groups is not None:
        for group, first in await groups.newer_firsts(fmt):
            older = in_format(first, formats)
            if older is not None and await groups.rewrite_first(group, older):
                rewritten += 1
    if rewritten:
        log.info("sink %s: %d queued records rewritten in record format %d for an older replica",
                 queue.sink, rewritten, fmt)
    return rewritten
