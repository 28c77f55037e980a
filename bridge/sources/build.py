"""Build the kind readers from their configuration (docs/design.md, section 2b): one per table of
every kind in `bridge/sources/kind_registry.py`, in its order."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from pydantic import BaseModel

from bridge.config.redis import RedisSettings
from bridge.core.errors import ConfigError
from bridge.sources.kind_plugin import KindContext, KindRegistry
from bridge.sources.kind_registry import KINDS
from bridge.sources.kinds import KindReader


@dataclass
class Built:
    sources: list[KindReader]
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


def check_kind_prerequisites(
    kinds: BaseModel, environ: Mapping[str, str] | None = None, registry: KindRegistry = KINDS
) -> None:
    """Before `run` starts: every client library and connection variable the kind tables need, so a
    missing one is one line and exit 2, not a traceback from inside the server's start-up."""
    problems = kind_variable_problems(kinds, environ, registry)
    for plugin, table in registry.configured(kinds):
        try:
            if plugin.requires is not None:
                KindContext.needs(*plugin.requires, table.source_name())
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)


def kind_variable_problems(
    kinds: BaseModel, environ: Mapping[str, str] | None = None, registry: KindRegistry = KINDS
) -> list[str]:
    """One line per connection variable a kind table names and the environment does not set: a
    configuration error (exit 2), as an unset variable of `[redis]` or of a sink is."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    for plugin, table in registry.configured(kinds):
        for attr in ("redis_url_env", "url_env"):
            variable = getattr(table, attr, None)
            if variable and not environ.get(variable, "").strip():
                where = f"sources.{plugin.kind}[{json.dumps(table.source_name(), ensure_ascii=False)}].{attr}"
                problems.append(f"{where}: environment variable {variable} is not set")
    return problems
