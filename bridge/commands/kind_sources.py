"""What the operator commands say about the configured kind sources (docs/sources.md).

`check` builds each kind reader and reports its depth; `peek` lists them and points to the job
system's own UI; `redrive` refuses them and says which UI retries (docs/design.md, section 2b).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import redis.asyncio as redis

from bridge.settings import Settings
from bridge.sources.build import build_kind_sources
from bridge.sources.kinds import KindSource

OWN_UI = {
    "sidekiq": "Sidekiq Web (the Dead tab) retries these jobs",
    "bullmq": "Bull Board (or Taskforce.sh) retries these jobs",
    "rq": "rq-dashboard (or `rq requeue`) retries these jobs",
    "redis_stream": "your stream's producer re-adds these entries (XADD to the work stream)",
    "rabbitmq": "the RabbitMQ management UI (a shovel, or Celery's own tools) moves these messages back",
    "sqs": "the SQS console's DLQ redrive (StartMessageMoveTask) moves these messages back",
}
KINDS = tuple(OWN_UI)


@dataclass(frozen=True)
class KindRef:
    kind: str
    name: str

    @property
    def own_ui(self) -> str:
        return OWN_UI[self.kind]


def configured(settings: Settings) -> list[KindRef]:
    """Every configured kind source, in build order (sidekiq, bullmq, rq, redis_stream, rabbitmq, sqs)."""
    sources = settings.sources
    return [KindRef(kind, table.source_name()) for kind in KINDS for table in getattr(sources, kind)]


def find(settings: Settings, queue: str) -> KindRef | None:
    """The kind source named `queue` (or the only source of kind `queue`); None for a list queue."""
    refs = configured(settings)
    by_name = [ref for ref in refs if ref.name == queue]
    by_kind = [ref for ref in refs if ref.kind == queue]
    if by_name:
        return by_name[0]
    return by_kind[0] if len(by_kind) == 1 else None


async def depths(settings: Settings, client: redis.Redis, probe_s: float) -> list[tuple[KindRef, int | str]]:
    """Depth per kind source, or the error's type name (never a URL or a secret)."""
    refs = configured(settings)
    if not refs:
        return []
    built = build_kind_sources(settings.sources.kinds(), bridge=client, consumer_id=settings.redis.consumer_id)
    try:
        return [(ref, await _depth(source, probe_s)) for ref, source in zip(refs, built.sources, strict=True)]
    finally:
        await built.close()


async def _depth(source: KindSource, probe_s: float) -> int | str:
    try:
        rescan = getattr(source, "rescan", None)
        if rescan is not None:
            await asyncio.wait_for(rescan(), probe_s)
        return await asyncio.wait_for(source.depth(), probe_s)
    except Exception as exc:  # any client library
        return type(exc).__name__
