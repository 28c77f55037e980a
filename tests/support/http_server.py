"""Real local HTTP servers (uvicorn on loopback) for integration tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from tests.support.redis_server import free_port


@contextlib.asynccontextmanager
async def serve(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Run an ASGI app on 127.0.0.1 in this event loop; yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
