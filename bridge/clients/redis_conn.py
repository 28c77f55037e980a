"""A redis.asyncio connection whose write timeout costs no task.

redis-py bounds each write with `asyncio.wait_for` when `socket_timeout` is set,
which on Python 3.11 creates one task per command (and one per pipeline batch).
This connection bounds the same write with `asyncio.timeout` instead: the same
limit, the same error (`redis.exceptions.TimeoutError`, the connection dropped),
no task. Reads already use `asyncio.timeout` in redis-py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from redis.asyncio.connection import Connection
from redis.exceptions import TimeoutError as RedisTimeoutError


class TasklessWriteConnection(Connection):
    async def send_packed_command(self, command: bytes | str | Iterable[bytes], check_health: bool = True) -> None:
        timeout = self.socket_timeout
        if not timeout:
            await super().send_packed_command(command, check_health)
            return
        self.socket_timeout = None  # the parent writes without wait_for; the bound is ours
        try:
            async with asyncio.timeout(timeout):
                await super().send_packed_command(command, check_health)
        except TimeoutError:
            raise RedisTimeoutError("Timeout writing to socket") from None
        finally:
            self.socket_timeout = timeout


def taskless_writes(url: str) -> dict[str, Any]:
    """Pool options for `url`: plain TCP (`redis://`) gets the taskless connection; TLS and
    unix sockets keep redis-py's own classes (their URL picks them)."""
    return {"connection_class": TasklessWriteConnection} if url.startswith("redis://") else {}
