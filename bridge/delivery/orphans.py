"""Sink queues whose sink is no longer configured (renamed or removed).

Their alerts wait in Redis and nothing delivers them: no worker serves a
queue of an unknown sink. They are found by SCAN (every master on a cluster),
reported at start-up and by `dlq-bridge check`, and never deleted: configure a
sink of that name again to deliver them (docs/operations.md).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.stores.sink_queue import queued_sinks

log = logging.getLogger(__name__)


async def orphan_sink_queues(client: redis.Redis, configured: Collection[str]) -> dict[str, int]:
    """Sink name → alerts queued, for each non-empty sink queue whose sink is not in `configured`."""
    found: dict[str, int] = {}
    async for sink, queued in queued_sinks(client, skip=configured):
        if queued:
            found[sink] = queued
    return found


async def warn_of_orphan_sink_queues(client: redis.Redis, configured: Collection[str]) -> dict[str, int]:
    """Log one warning per orphan sink queue (start-up); Redis errors only skip the report."""
    try:
        found = await orphan_sink_queues(client, configured)
    except (RedisError, OSError) as exc:
        log.warning("could not look for sink queues of removed sinks (%s)", type(exc).__name__)
        return {}
    for sink, queued in sorted(found.items()):
        log.warning("sink queue of %r holds %d alert(s) but no sink %r is configured: nothing delivers them "
                    "until a sink of that name is configured again", sink, queued, sink)
    return found
