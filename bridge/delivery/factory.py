"""Builds the sinks named in settings and the dispatcher that routes to them."""

from __future__ import annotations

from typing import TextIO

import httpx
import redis.asyncio as redis

from bridge.delivery.dispatcher import Dispatcher, Route
from bridge.health import Health
from bridge.metrics import Metrics
from bridge.settings import ConsoleSinkSettings, Settings
from bridge.sinks.console import ConsoleSink


def build_dispatcher(
    settings: Settings,
    client: redis.Redis,
    http: httpx.AsyncClient,
    metrics: Metrics,
    health: Health,
    stdout: TextIO | None = None,
) -> Dispatcher:
    routes = []
    for sink_settings in settings.effective_sinks():
        if isinstance(sink_settings, ConsoleSinkSettings):
            sink = ConsoleSink(sink_settings.name, stdout, sink_settings.color)
            routes.append(Route(sink_settings, sink))
    return Dispatcher(routes)
