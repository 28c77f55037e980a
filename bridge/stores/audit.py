"""The console's audit list: every action, who and when (`dlq_bridge:audit`, newest left, capped)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import redis.asyncio as redis
from pydantic import BaseModel, ConfigDict, ValidationError

from bridge.stores import keys

KEEP = 1000


class AuditRecord(BaseModel):
    """One console action: who did what to which target, with what outcome."""

    model_config = ConfigDict(frozen=True)

    at: float
    who: str
    action: str
    target: str
    outcome: str
    detail: str = ""


class AuditLog:
    """LPUSH + LTRIM one JSON record per action; read newest first."""

    def __init__(self, client: redis.Redis, keep: int = KEEP, clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self._keep = keep
        self._clock = clock

    async def append(self, who: str, action: str, target: str, outcome: str, detail: str = "") -> AuditRecord:
        record = AuditRecord(at=self._clock(), who=who, action=action, target=target, outcome=outcome, detail=detail)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(keys.AUDIT, record.model_dump_json())
            pipe.ltrim(keys.AUDIT, 0, self._keep - 1)
            await pipe.execute()
        return record

    async def recent(self, limit: int = 100) -> list[AuditRecord]:
        found = []
        for raw in await self._redis.lrange(keys.AUDIT, 0, max(limit, 1) - 1):
            try:
                found.append(AuditRecord.model_validate(json.loads(raw)))
            except (ValidationError, ValueError):
                continue
        return found
