"""What one in-process drain costs besides time: Redis commands and round trips, asyncio tasks.

- Redis commands: the `INFO commandstats` delta of the server, per command. Redis counts
  the commands a Lua script runs too, so a script's LREM/LPUSH/... appear beside its EVALSHA.
- Round trips: writes of this process's redis.asyncio connections (one per command, one per
  pipeline batch), counted by wrapping `Connection.send_packed_command`.
- Tasks: every asyncio task created on the loop, counted by a task factory.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.asyncio.connection import Connection


def commandstats(url: str) -> Counter[str]:
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})


class RoundTrips:
    """Counts `send_packed_command` calls of redis.asyncio connections while installed."""

    def __init__(self) -> None:
        self.count = 0

    @contextmanager
    def installed(self) -> Iterator[RoundTrips]:
        original = Connection.send_packed_command
        probe = self

        async def counted(conn: Connection, command: Any, check_health: bool = True) -> None:
            probe.count += 1
            await original(conn, command, check_health)

        Connection.send_packed_command = counted  # type: ignore[method-assign]
        try:
            yield self
        finally:
            Connection.send_packed_command = original  # type: ignore[method-assign]


class TaskCounter:
    """A task factory that counts the tasks created on the running loop."""

    def __init__(self) -> None:
        self.count = 0
        self.by_name: Counter[str] = Counter()

    def install(self) -> None:
        loop = asyncio.get_running_loop()

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
        ) -> asyncio.Task[Any]:
            self.count += 1
            self.by_name[getattr(coro, "__qualname__", type(coro).__name__)] += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)  # type: ignore[arg-type]
