"""A source kind as a plug-in: its `[[sources.<kind>]]` table, its builder, and what operators are told.

The kinds are listed once, in `bridge/sources/kind_registry.py`; the `[sources]` section's kind
tables (bridge/settings.py), the build (`bridge.sources.build`), `check`, `peek`, `redrive` and the
config reference all read that list. Adding a kind is one module (its table model, a `KindPlugin`)
plus one line in the registry (docs/architecture.md, "How to add a source kind").
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from bridge.clients.redis_client import build_redis
from bridge.config.redis import RedisSettings
from bridge.core.errors import ConfigError
from bridge.sources.kind_settings import KindSettings, duplicate_source_name
from bridge.sources.kinds import KindReader

K = TypeVar("K", bound=KindSettings)

KINDS_EXTRA = "pip install 'dlq-bridge[kinds]'"
"""What installs every kind's client library (the `kinds` extra of pyproject.toml)."""


def env_value(environ: Mapping[str, str], name: str, owner: str) -> str:
    """The value of environment variable `name`; a ConfigError naming it (never a value) when unset."""
    value = environ.get(name, "").strip()
    if not value:
        raise ConfigError([f"source {owner}: environment variable {name} is not set"])
    return value


@dataclass
class KindContext:
    """What a kind's builder may use: the bridge's Redis (cursors live there), this bridge's id, the
    environment (connection strings), and `store` for a job system's own Redis."""

    bridge: aioredis.Redis
    consumer_id: str
    environ: Mapping[str, str]
    redis: RedisSettings = field(default_factory=RedisSettings)
    clients: list[aioredis.Redis] = field(default_factory=list)  # opened by `store`: closed on shutdown

    def env(self, name: str, owner: str) -> str:
        """The value of environment variable `name`; a ConfigError naming it (never a value) when unset."""
        return env_value(self.environ, name, owner)

    def store(self, redis_url_env: str | None, owner: str) -> aioredis.Redis:
        """The Redis a table names by `redis_url_env` (bridge.clients.redis_client), else the bridge's."""
        if redis_url_env is None:
            return self.bridge
        one_node = self.redis.model_copy(update={"cluster": False})  # a job system's Redis, not the bridge's cluster
        client = build_redis(self.env(redis_url_env, owner), one_node, max_connections=64)
        self.clients.append(client)
        return client

    @staticmethod
    def needs(module: str, package: str, owner: str) -> None:
        """A kind whose client library is not installed is a configuration error, not a crash later."""
        if importlib.util.find_spec(module) is None:
            raise ConfigError([f"source {owner}: needs the Python package {package}: {KINDS_EXTRA}"])


@dataclass(frozen=True)
class KindPlugin(Generic[K]):
    """One source kind: `kind` names its `[[sources.<kind>]]` tables, validated by `settings`; `build`
    makes one reader per table; `described` is the reference's line; `own_ui` what retries its jobs;
    `requires` the client library it imports, as (module, pip package), when not a core dependency."""

    kind: str
    settings: type[K]
    build: Callable[[K, KindContext], KindReader]
    described: str
    own_ui: str
    requires: tuple[str, str] | None = None


class KindRegistry:
    """The source kinds, in build order."""

    def __init__(self, plugins: Sequence[KindPlugin[Any]]) -> None:
        self._by_kind = {p.kind: p for p in plugins}
        if len(self._by_kind) != len(plugins):
            raise ValueError("two kind plug-ins of one name")

    def __iter__(self) -> Iterator[KindPlugin[Any]]:
        return iter(list(self._by_kind.values()))

    def names(self) -> list[str]:
        return list(self._by_kind)

    def named(self, kind: str) -> KindPlugin[Any]:
        return self._by_kind[kind]

    def tables_model(self, name: str, base: type[BaseModel]) -> type[BaseModel]:
        """`base` with one `list[<table>]` field per kind (the `[[sources.<kind>]]` arrays), their names
        checked unique across kinds."""
        fields: dict[str, Any] = {
            p.kind: (list[p.settings], Field(default_factory=list, description=p.described))  # type: ignore[name-defined]
            for p in self
        }
        kinds = self.names()

        def unique_names(model: Any) -> Any:
            problem = duplicate_source_name([t for kind in kinds for t in getattr(model, kind)])
            if problem:
                raise ValueError(problem)
            return model

        validators: dict[str, Any] = {"_unique_kind_names": model_validator(mode="after")(unique_names)}
        model: type[BaseModel] = create_model(name, __base__=base, __validators__=validators, **fields)
        return model

    def configured(self, tables: BaseModel) -> list[tuple[KindPlugin[Any], KindSettings]]:
        """Every configured table of `tables` (a model from `tables_model`), in build order."""
        return [(p, table) for p in self for table in getattr(tables, p.kind)]


class KindTablesBase(BaseModel):
    """What `KindSources` (the kind arrays alone) is built on: keys of other sections are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    def all(self) -> list[KindSettings]:
        """Every table, in field (build) order."""
        return [t for name in type(self).model_fields for t in getattr(self, name)]
