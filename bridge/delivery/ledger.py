"""The per-sink delivery ledger (DESIGN section 2): what already reached a sink.

`dlq_bridge:delivered:<sink>:<idempotency key>:<digest>` is checked before
sending and set (`SET NX`, TTL `ledger_ttl_s`) after a 2xx, so a replay after
a crash re-sends only to sinks that had not succeeded.
"""

from __future__ import annotations

import asyncio
import json
import time

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge import keys
from bridge.models import Alert

MARK_TRIES = 3
MARK_PAUSE_S = 0.2


class Ledger:
    """Reads and writes delivery marks; Redis errors propagate to the caller."""

    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._redis = client
        self._ttl_s = ttl_s

    @staticmethod
    def key(sink: str, alert: Alert) -> str:
        return keys.delivered(sink, alert.idempotency_key, alert.dead_letter.raw_digest)

    async def delivered(self, sink: str, alert: Alert) -> bool:
        return await self.delivered_at(self.key(sink, alert))

    async def delivered_at(self, key: str) -> bool:
        """By ledger key (a group notification's, docs/design.md section 5b)."""
        return bool(await self._redis.exists(key))

    async def mark(self, sink: str, alert: Alert) -> None:
        """Record a success; a few quick tries, shielded from cancellation, then raise."""
        await self.mark_at(self.key(sink, alert))

    async def mark_at(self, key: str) -> None:
        await asyncio.shield(self._mark_with_tries(key))

    async def _mark_with_tries(self, key: str) -> None:
        value = json.dumps({"at": time.time()})
        for attempt in range(MARK_TRIES):
            try:
                await self._redis.set(key, value, nx=True, ex=self._ttl_s)
                return
            except RedisError:
                if attempt == MARK_TRIES - 1:
                    raise
                await asyncio.sleep(MARK_PAUSE_S * (attempt + 1))
