"""ConsoleService.sources over list and kind sources: depths, archives, kinds asked concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from bridge.console.service import ConsoleService, KindRef
from bridge.settings import Settings
from bridge.sources.kinds import KindRecord, Receipt
from bridge.stores import keys


@dataclass
class FakeKind:
    """A kind source as the console sees it: a name and a depth (or a failing store)."""

    name: str
    found: int | None
    meet: asyncio.Barrier | None = None  # depth answers only once every source sharing it is asked

    async def rescan(self) -> list[str]:

        return []


    async def depth(self) -> int:
        if self.meet is not None:
            await self.meet.wait()
        if self.found is None:
            raise ConnectionError("store down")
        return self.found

    async def claim(self) -> KindRecord | None:
        return None

    async def ack(self, receipt: Receipt) -> bool:
        return False

    async def close(self) -> None:
        return None


async def test_every_source_with_its_kind_depth_and_archive(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", b"x", b"y")
    await aredis.lpush(keys.alerted("dead_letter:gone"), b"old")  # drained DLQ, archive left
    await aredis.lpush(keys.alerted("sidekiq"), b"a")  # a kind source's archive
    meet = asyncio.Barrier(2)  # asked one after the other, each would time out (depth None)
    kinds = [KindRef("sidekiq", FakeKind("sidekiq", 7, meet)), KindRef("bullmq", FakeKind("bull", 3, meet)),
             KindRef("rq", FakeKind("rq", None))]
    service = ConsoleService(make_settings(), aredis, list_sources=lambda: ["dead_letter:orders"], kinds=kinds)
    views = {v.source: v for v in await service.sources()}
    assert sorted(views) == ["bull", "dead_letter:gone", "dead_letter:orders", "rq", "sidekiq"]
    assert (views["dead_letter:orders"].kind, views["dead_letter:orders"].depth) == ("list", 2)
    assert (views["dead_letter:gone"].depth, views["dead_letter:gone"].archived) == (0, 1)
    assert (views["sidekiq"].kind, views["sidekiq"].depth, views["sidekiq"].archived) == ("sidekiq", 7, 1)
    assert views["bull"].depth == 3, "kind stores are asked side by side"
    assert views["rq"].depth is None and views["sidekiq"].redrivable is False
