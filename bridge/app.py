"""The FastAPI app: `/healthz` (readiness), `/livez` (liveness), `/metrics`, the console (built from
the runtime), and the pipeline in the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse, RedirectResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from redis.exceptions import RedisError

from bridge.clients.redis_client import probe
from bridge.clients.redis_memory import OUT_OF_MEMORY
from bridge.core.health import Status
from bridge.runtime import Runtime, freeze_heap, open_runtime
from bridge.settings import Settings

if TYPE_CHECKING:  # the console's modules (and Jinja2) load only when it is enabled: about 3.5 MB
    from bridge.console.api import Console
    from bridge.console.service import ConsoleService
    from bridge.redrive.operation import Resolver

log = logging.getLogger(__name__)

REDIS_PING_TIMEOUT_S = 1.0
LOOP_STALL_S = 30.0
LIVENESS_CHECKS = ("redis", "loop")
IDLE_EXIT_S = 0.5  # on SIGTERM with Redis down: nothing in flight this long, stop without it


RETRY_ATTEMPTS = 3


def default_resolver() -> Resolver:
    """`bridge.delivery.resolve.enqueue_resolve`: durable, through each resolving sink's queue."""
    from bridge.redrive.operation import default_resolver as resolver

    return resolver()


def build_console(runtime: Runtime, resolver: Resolver | None = None) -> Console:
    """The console (read side and actions) over the running runtime's Redis, routes and silences."""
    from bridge.console.actions import ConsoleActions
    from bridge.console.api import Console
    from bridge.console.auth import Authenticator
    from bridge.console.service import ConsoleService, KindRef
    from bridge.delivery.assembly import build_ledger
    from bridge.delivery.send import Deliverer
    from bridge.sources import refs as kind_sources

    settings = runtime.settings
    kinds = [KindRef(ref.kind, source)
             for ref, source in zip(kind_sources.configured(settings), runtime.kinds.sources, strict=False)]
    read_only = Authenticator(settings.console.token, settings.console.auth).read_only
    service = ConsoleService(settings, runtime.redis, list_sources=lambda: runtime.source.sources, kinds=kinds,
                             health=runtime.health, read_only=read_only)
    delivery = settings.delivery.model_copy(update={"max_attempts": RETRY_ATTEMPTS})
    ledger = build_ledger(settings, runtime.redis, owner=f"{settings.redis.consumer_id}.console")
    deliverer = Deliverer(delivery, ledger, runtime.metrics, runtime.health)
    actions = ConsoleActions(
        service, runtime.redis, resolver=resolver or default_resolver(),
        routes={r.sink.name: r for r in runtime.dispatcher.routes}, deliverer=deliverer,
        silences=runtime.delivery.handoff.silences,
    )
    return Console(service, actions)


def create_app(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    """Build the service; the runtime starts and stops with the app."""
    state: dict[str, Runtime] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings, transport=transport) as runtime:
            state["runtime"] = runtime
            if settings.console.enabled:
                app.state.console = build_console(runtime)
            freeze_heap()
            stop = asyncio.Event()
            watch = asyncio.create_task(runtime.memory.watch(stop, allow_eviction=settings.redis.allow_eviction),
                                        name="redis-memory")
            task = asyncio.create_task(runtime.pipeline.run(stop), name="pipeline")
            try:
                yield
            finally:
                await _stop_pipeline(runtime, stop, task, settings.server.grace_s)
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    app = FastAPI(title="dlq-bridge", lifespan=lifespan, docs_url=None, redoc_url=None)

    if settings.console.enabled:
        _mount_console(app, settings)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        runtime = state.get("runtime")
        if runtime is None:
            return JSONResponse({"status": "starting", "checks": {}}, status_code=503)
        await _probe(runtime)
        failing = runtime.health.failing()
        body = {"status": "failing" if failing else "ok", "version": runtime.version,
                "record_formats": {"reads": runtime.formats.reads, "writes": runtime.formats.writes},
                "checks": runtime.health.snapshot()}
        return JSONResponse(body, status_code=503 if failing else 200)

    @app.get("/livez")
    async def livez() -> JSONResponse:
        """For a liveness probe: only what restarting could fix (Redis, the claim loop), not a broker
        outage or a sink; `/healthz` is the readiness answer (docs/design.md, section 6)."""
        runtime = state.get("runtime")
        if runtime is None:
            return JSONResponse({"status": "starting", "checks": {}}, status_code=503)
        await _probe(runtime)
        checks = {n: c for n, c in runtime.health.snapshot().items() if n in LIVENESS_CHECKS}
        failing = any(_restart_would_fix(c) for c in checks.values())
        return JSONResponse({"status": "failing" if failing else "ok", "checks": checks},
                            status_code=503 if failing else 200)

    @app.get("/metrics")
    async def metrics() -> Response:
        runtime = state.get("runtime")
        data = runtime.metrics.render() if runtime else b""
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    return app


def _mount_console(app: FastAPI, settings: Settings) -> None:
    """`/api/v1` and `/console/`; the console itself is built in the lifespan, once the runtime runs."""
    from bridge.console.api import build_api
    from bridge.console.auth import Authenticator
    from bridge.console.pages import pages_router

    auth = Authenticator(settings.console.token, settings.console.auth)
    app.state.console_auth = auth
    app.include_router(build_api())
    app.include_router(pages_router(lambda: _console_service(app), settings.runbooks.base_url, auth,
                                   refresh_s=settings.console.refresh_s, trace_link=settings.tracing.trace_link))

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        """The address a person types leads to the console."""
        return RedirectResponse("/console/", status_code=307)


def _console_service(app: FastAPI) -> ConsoleService | None:
    """The running console's read side for the pages; None while the bridge starts."""
    from bridge.console.api import running_console

    console = running_console(app)
    return console.service if console is not None else None


def _restart_would_fix(check: dict[str, str]) -> bool:
    """A full Redis fails readiness, never liveness: a restart frees no memory."""
    return check["status"] == Status.FAILING.value and not check.get("detail", "").startswith(OUT_OF_MEMORY)


async def _redis_problem(runtime: Runtime) -> str | None:
    problem = await probe(runtime.redis)
    if problem is None:
        await runtime.memory.refresh()
        problem = runtime.memory.problem()
    return problem


async def _probe(runtime: Runtime) -> None:
    """Ask Redis right now (up, serving every slot, not full), and check the claim loop still ticks."""
    try:
        problem = await asyncio.wait_for(_redis_problem(runtime), timeout=REDIS_PING_TIMEOUT_S)
        runtime.health.set("redis", Status.FAILING if problem else Status.OK, problem or "")
    except Exception as exc:  # any failure to answer means Redis is not usable
        runtime.health.set("redis", Status.FAILING, type(exc).__name__)
    if time.monotonic() - runtime.pipeline.last_tick > LOOP_STALL_S and not _redis_failing(runtime):
        runtime.health.set("loop", Status.FAILING, f"no claim-loop tick for {LOOP_STALL_S:.0f}s")


async def _stop_pipeline(runtime: Runtime, stop: asyncio.Event, task: asyncio.Task[None], grace_s: float) -> None:
    """Stop claiming; let in-flight entries finish within the grace period, else leave them.

    With Redis up, the pipeline ends by itself once nothing is in flight (and
    drops its heartbeat). With Redis down it would retry until the grace period
    is over: once nothing has been in flight for IDLE_EXIT_S the wait ends
    there. An entry whose claim was under way stays in the processing list and
    is returned at the next start or by another bridge's reaper.
    """
    stop.set()
    if not await _finished_or_idle(runtime, task, time.monotonic() + grace_s):
        log.warning("grace period over: leaving in-flight entries in the processing list")
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    elif not task.cancelled() and task.exception() is not None:
        _log_stop_error(task.exception())
    log.info("pipeline stopped after %d entries", runtime.pipeline.processed)


def _redis_failing(runtime: Runtime) -> bool:
    check = runtime.health.get("redis")
    return check is not None and check.status is Status.FAILING


def _log_stop_error(exc: BaseException | None) -> None:
    if isinstance(exc, (RedisError, OSError)):  # e.g. dropping the heartbeat; it expires by itself
        log.warning("pipeline stopped while Redis was unavailable (%s)", type(exc).__name__)
    else:
        log.error("pipeline stopped with an error", exc_info=exc)


async def _finished_or_idle(runtime: Runtime, task: asyncio.Task[None], deadline: float) -> bool:
    """Wait until the pipeline task ends or has had nothing in flight for a moment; False at `deadline`."""
    idle_since: float | None = None
    while not task.done():
        now = time.monotonic()
        if now >= deadline:
            return False
        if runtime.pipeline.in_flight:
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= IDLE_EXIT_S and _redis_failing(runtime):
            log.info("nothing in flight and Redis unavailable: stopping now")
            return True
        await asyncio.wait({task}, timeout=min(0.1, deadline - now))
    return True
