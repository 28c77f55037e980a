"""Build the kind readers from their configuration (docs/design.md, section 2b): one per table of
every kind in `bridge/sources/registry.py`, in its order."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from pydantic import BaseModel

from bridge.config.redis import RedisSettings
from bridge.sources.kinds import KindSource
from bridge.sources.plugin import KindContext, KindRegistry
from bridge.sources.registry import KINDS


@dataclass
class Built:
    sources: list[KindSource]
    clients: list[aioredis.Redis] = field(default_factory=list)  # opened here: close on shutdown

    async def close(self) -> None:
        for source in self.sources:
            await source.close()
        for client in self.clients:
            await client.aclose()


def build_kind_sources(
    kinds: BaseModel,
    *,
    bridge: aioredis.Redis,
    consumer_id: str,
    environ: Mapping[str, str] | None = None,
    redis: RedisSettings | None = None,
    registry: KindRegistry = KINDS,
) -> Built:
    """One reader per configured table of `kinds` (its `[sources]` section, or `KindSources`)."""
    ctx = KindContext(bridge, consumer_id, os.environ if environ is None else environ, redis or RedisSettings())
    sources = [plugin.build(table, ctx) for plugin, table in registry.configured(kinds)]
    return Built(sources, ctx.clients)
