"""The interface every sink implements.

A sink renders one Alert and makes one attempt to send it. Retries, the
ledger, pacing and undeliverable records belong to `bridge.delivery`.
"""

from __future__ import annotations

from typing import Any, Protocol

from bridge.models import Alert


class Sink(Protocol):
    name: str

    def render(self, alert: Alert) -> dict[str, Any]:
        """The body this sink would send (used by `summarize` dry runs)."""
        ...

    async def send(self, alert: Alert) -> None:
        """One attempt. Raises SinkRetryable or SinkPermanent on failure."""
        ...
