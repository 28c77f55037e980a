"""The kinds are listed once (bridge/sources/kind_registry.py): `[sources]`, the build and the config
reference follow that list, and a registry with one more kind gets its table and its reader
without any other change."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import Field, ValidationError

from bridge.commands.config_reference import reference
from bridge.config.sources import ListSourcesSettings
from bridge.settings import Settings
from bridge.sources.build import build_kind_sources
from bridge.sources.kind_plugin import KindContext, KindPlugin, KindRegistry
from bridge.sources.kind_registry import KINDS
from bridge.sources.kind_settings import KindSettings
from bridge.sources.kinds import KindRecord, Receipt


class ToyKindSettings(KindSettings):
    """`[[sources.toy]]`: records from a list of the bridge's own Redis."""

    key: str = Field(default="toy:dead", description="The list.")
    redis_url_env: str | None = Field(default=None, description="Its Redis (unset: the bridge's).")

    def default_name(self) -> str:
        return f"toy.{self.key}"


class ToySource:
    def __init__(self, name: str, client: aioredis.Redis, key: str) -> None:
        self._name, self._client, self.key = name, client, key

    @property
    def name(self) -> str:
        return self._name

    async def claim(self) -> KindRecord | None:
        return None

    async def ack(self, receipt: Receipt) -> bool:
        return True

    async def rescan(self) -> list[str]:

        return []


    async def depth(self) -> int:
        return int(await self._client.llen(self.key))

    async def close(self) -> None:
        return None


def _build(cfg: ToyKindSettings, ctx: KindContext) -> ToySource:
    return ToySource(cfg.source_name(), ctx.store(cfg.redis_url_env, cfg.source_name()), cfg.key)


TOY = KindPlugin("toy", ToyKindSettings, _build, "`[[sources.toy]]`: a toy list (tests).", "nothing retries toys")


def test_every_registered_kind_is_a_sources_array_and_a_reference_section() -> None:
    sources = Settings.model_fields["sources"].annotation
    assert isinstance(sources, type)
    assert [k for k in sources.model_fields if k in KINDS.names()] == KINDS.names()
    text = reference()
    assert all(f"`[[sources.{kind}]]`" in text for kind in KINDS.names())


async def test_one_more_kind_gets_its_table_and_its_reader(aredis: aioredis.Redis) -> None:
    registry = KindRegistry([*KINDS, TOY])
    model: Any = registry.tables_model("ToySources", ListSourcesSettings)
    sources = model.model_validate({"toy": [{"key": "toy:a"}, {"key": "toy:b"}], "concurrency": 4})
    await aredis.rpush("toy:b", "x", "y")
    built = build_kind_sources(sources, bridge=aredis, consumer_id="c1", environ={}, registry=registry)
    try:
        assert [s.name for s in built.sources] == ["toy.toy:a", "toy.toy:b"]
        assert [await s.depth() for s in built.sources] == [0, 2]
    finally:
        await built.close()
    with pytest.raises(ValidationError, match="give one of them its own `name`"):
        model.model_validate({"toy": [{"key": "toy:a"}, {"key": "toy:a"}]})
