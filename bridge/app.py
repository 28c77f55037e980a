"""The FastAPI app: `/healthz`, `/metrics`, and the pipeline in the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from bridge.health import Status
from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings

log = logging.getLogger(__name__)

REDIS_PING_TIMEOUT_S = 1.0
LOOP_STALL_S = 30.0


def create_app(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    """Build the service; the runtime starts and stops with the app."""
    state: dict[str, Runtime] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings, transport=transport) as runtime:
            state["runtime"] = runtime
            stop = asyncio.Event()
            task = asyncio.create_task(runtime.pipeline.run(stop), name="pipeline")
            try:
                yield
            finally:
                await _stop_pipeline(runtime, stop, task, settings.server.grace_s)

    app = FastAPI(title="dlq-bridge", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        runtime = state.get("runtime")
        if runtime is None:
            return JSONResponse({"status": "starting", "checks": {}}, status_code=503)
        await _probe(runtime)
        failing = runtime.health.failing()
        body = {"status": "failing" if failing else "ok", "checks": runtime.health.snapshot()}
        return JSONResponse(body, status_code=503 if failing else 200)

    @app.get("/metrics")
    async def metrics() -> Response:
        runtime = state.get("runtime")
        data = runtime.metrics.render() if runtime else b""
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    return app


async def _probe(runtime: Runtime) -> None:
    """Ask Redis right now, and check the claim loop still ticks."""
    try:
        await asyncio.wait_for(runtime.redis.ping(), timeout=REDIS_PING_TIMEOUT_S)
        runtime.health.set("redis", Status.OK)
    except Exception as exc:  # any failure to answer means Redis is not usable
        runtime.health.set("redis", Status.FAILING, type(exc).__name__)
    if time.monotonic() - runtime.pipeline.last_tick > LOOP_STALL_S and not runtime.health.failing():
        runtime.health.set("loop", Status.FAILING, f"no claim-loop tick for {LOOP_STALL_S:.0f}s")


async def _stop_pipeline(runtime: Runtime, stop: asyncio.Event, task: asyncio.Task[None], grace_s: float) -> None:
    """Stop claiming; let in-flight entries finish within the grace period, else leave them."""
    stop.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout=grace_s)
    except TimeoutError:
        log.warning("grace period over: leaving in-flight entries in the processing list")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    except Exception:
        log.exception("pipeline stopped with an error")
    log.info("pipeline stopped after %d entries", runtime.pipeline.processed)
