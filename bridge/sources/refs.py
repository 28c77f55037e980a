"""What the operator commands and the console say about the configured kind sources (docs/sources.md).

`check` builds each kind reader and reports its depth; `peek` lists them and points to the job
system's own UI; `redrive` refuses them and says which UI retries (docs/design.md, section 2b).
Each takes the configuration as a `KindConfig` (`bridge.settings.Settings` is one): the sources sit
below the settings, which import their registry.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as redis
from pydantic import BaseModel

from bridge.config.redis import RedisSettings
from bridge.sources.build import build_kind_sources
from bridge.sources.kind_registry import KINDS
from bridge.sources.kinds import KindReader
from bridge.sources.watched_table import Access, WatchedTable


class KindConfig(Protocol):
    """What the refs read of the configuration: the kind source tables and the bridge's Redis."""

    @property
    def sources(self) -> BaseModel: ...

    @property
    def redis(self) -> RedisSettings: ...


@dataclass(frozen=True)
class KindRef:
    kind: str
    name: str

    @property
    def own_ui(self) -> str:
        return KINDS.named(self.kind).own_ui


def configured(settings: KindConfig) -> list[KindRef]:
    """Every configured kind source, in build order (bridge/sources/kind_registry.py)."""
    return [KindRef(plugin.kind, table.source_name()) for plugin, table in KINDS.configured(settings.sources)]


def find(settings: KindConfig, queue: str) -> KindRef | None:
    """The kind source named `queue` (or the only source of kind `queue`); None for a list queue."""
    refs = configured(settings)
    by_name = [ref for ref in refs if ref.name == queue]
    by_kind = [ref for ref in refs if ref.kind == queue]
    if by_name:
        return by_name[0]
    return by_kind[0] if len(by_kind) == 1 else None


async def depths(settings: KindConfig, client: redis.Redis, probe_s: float) -> list[tuple[KindRef, int | str]]:
    """Depth per kind source, or the error's type name (never a URL or a secret)."""
    return [(ref, depth) for ref, depth, _ in await probes(settings, client, probe_s)]


async def probes(
    settings: KindConfig, client: redis.Redis, probe_s: float
) -> list[tuple[KindRef, int | str, Access | None]]:
    """`depths`, and for a source reading database tables what its role may do there (None: not a table
    source, or it could not be asked)."""
    refs = configured(settings)
    if not refs:
        return []
    built = build_kind_sources(
        settings.sources, bridge=client, consumer_id=settings.redis.consumer_id, redis=settings.redis
    )
    try:
        return [
            (ref, await _depth(source, probe_s), await _access(source, probe_s))
            for ref, source in zip(refs, built.sources, strict=True)
        ]
    finally:
        await built.close()


async def _access(source: KindReader, probe_s: float) -> Access | None:
    tables = [t for t in getattr(source, "stores", list)() if isinstance(t, WatchedTable)]
    try:
        return await asyncio.wait_for(tables[0].access(), probe_s) if tables else None
    except Exception:  # unreachable: the depth says so
        return None


async def _depth(source: KindReader, probe_s: float) -> int | str:
    try:
        rescan = getattr(source, "rescan", None)
        if rescan is not None:
            await asyncio.wait_for(rescan(), probe_s)
        return await asyncio.wait_for(source.depth(), probe_s)
    except Exception as exc:  # any client library
        return type(exc).__name__
