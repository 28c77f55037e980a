"""A scriptable HTTP receiver (FastAPI on loopback) that records every request."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis.asyncio as aioredis
from fastapi import FastAPI, Request, Response

from bridge.clients.http import build_http_client
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, DeadLetter, Severity, Summary, SummarySource
from bridge.delivery.assembly import build_dispatcher
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.send import Result
from bridge.settings import Settings


@dataclass
class Received:
    at: float  # time.monotonic() when the request arrived
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0  # what the receiver answered


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "ok"
    delay_s: float = 0.0


class Receiver:
    """Answers with `script` replies in order, then `default`; records requests."""

    def __init__(self, script: list[Reply] | None = None, default: Reply | None = None) -> None:
        self.script = list(script or [])
        self.default = default or Reply()
        self.requests: list[Received] = []
        self.app = FastAPI()
        self.app.post("/{path:path}")(self._handle)

    async def _handle(self, request: Request, path: str) -> Response:
        body = await request.body()
        reply = self.script.pop(0) if self.script else self.default
        self.requests.append(Received(time.monotonic(), path, dict(request.headers), body, reply.status))
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    def gaps(self) -> list[float]:
        times = [r.at for r in self.requests]
        return [b - a for a, b in itertools.pairwise(times)]


def make_alert(
    *,
    queue: str = "orders",
    job_id: str = "job-1",
    last_error: str | None = "TimeoutError: warehouse API timed out after 30s",
    severity: Severity = Severity.ERROR,
    runbook_url: str | None = None,
    is_test: bool = False,
    **dead_letter: Any,
) -> Alert:
    fields: dict[str, Any] = {
        "source_key": f"dead_letter:{queue}",
        "queue": queue,
        "job_id": job_id,
        "job_name": "ship_order",
        "attempts": 3,
        "correlation_id": "corr-1",
        "last_error": last_error,
        "first_failed_at": "2026-11-30T00:00:00+00:00",
        "payload_excerpt": '{"order": 1}',
        "raw_digest": "0123456789abcdef",
        **dead_letter,
    }
    summary = Summary(
        title=f"ship_order failed on {queue}"[:120],
        severity=severity,
        likely_cause="The warehouse API timed out.",
        next_steps=["Check the warehouse API status", "Redrive the job"],
        runbook_hint="timeouts",
        source=SummarySource.FALLBACK,
        fallback_reason="disabled",
    )
    return Alert(
        dead_letter=DeadLetter(**fields), summary=summary, runbook_url=runbook_url, is_test=is_test
    )


@dataclass
class Delivery:
    """A dispatcher built exactly as the runtime builds it, plus what it reports into."""

    dispatcher: Dispatcher
    metrics: Metrics
    health: Health
    http: httpx.AsyncClient


@contextlib.asynccontextmanager
async def open_delivery(settings: Settings, client: aioredis.Redis) -> AsyncIterator[Delivery]:
    http = build_http_client(settings.http)
    metrics, health = Metrics(), Health()
    try:
        dispatcher = build_dispatcher(settings, client, http, metrics, health)
        yield Delivery(dispatcher, metrics, health, http)
        await dispatcher.aclose()
    finally:
        await http.aclose()


async def dispatch(dispatcher: Dispatcher, alert: Alert) -> list[Result]:
    """Every routed sink's delivery of `alert`, concurrently, as a sink worker runs each (tests only:
    the bridge never sends directly). A Redis error is raised once every sink is final."""
    outcomes = await asyncio.gather(
        *(dispatcher.deliver_one(route, alert) for route in dispatcher.routed(alert)), return_exceptions=True
    )
    results = [o for o in outcomes if isinstance(o, Result)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise errors[0]
    return results


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else float(value)
