"""Read-only view of the processing lists (`dlq_bridge:processing:<ref>:<consumer>`) for `peek`, and
which keys are the bridge's own (`dlq_bridge:*`); docs/design.md, section 2.

The claim side owns the processing lists; this only counts them per source.
"""

from __future__ import annotations

from collections import defaultdict

import redis.asyncio as redis

from bridge.stores import keys


def is_bridge_key(key: str) -> bool:
    """True for a key in the bridge's own namespace (never a producer's DLQ)."""
    return key.startswith(keys.PREFIX + ":")


async def processing_depths(client: redis.Redis, count: int = 1000) -> dict[str, int]:
    """Source → entries claimed and not finished, over every consumer's processing list (SCAN, LLEN)."""
    found = [key async for key in client.scan_iter(match=keys.PROCESSING_MATCH, count=count, _type="list")]
    processing: dict[str, int] = defaultdict(int)
    for key in sorted({k.decode("utf-8", errors="replace") for k in found}):
        parsed = keys.parse_processing(key)
        if parsed is not None:
            processing[parsed.source_key] += int(await client.llen(key))
    return dict(processing)
