"""Routes an alert to every matching sink and returns when each is final."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.models import Alert
from bridge.settings import SinkSettings
from bridge.sinks.base import Sink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    settings: SinkSettings
    sink: Sink


class Dispatcher:
    """Sends one alert to its routed sinks concurrently."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self._routes = list(routes)

    def routed(self, alert: Alert) -> list[Route]:
        queue, severity = alert.dead_letter.queue, alert.severity
        return [r for r in self._routes if r.settings.routes(queue, severity)]

    async def dispatch(self, alert: Alert) -> None:
        """Deliver to every routed sink; returns when each is final."""
        await asyncio.gather(*(self._send(route, alert) for route in self.routed(alert)))

    async def _send(self, route: Route, alert: Alert) -> None:
        try:
            await route.sink.send(alert)
        except Exception as exc:
            log.warning("sink %s failed for %s: %s", route.sink.name, alert.idempotency_key, exc)

    async def aclose(self) -> None:
        return None
