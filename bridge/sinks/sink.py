"""The interface every sink implements.

A sink renders one Alert, or one group Notification, and makes one attempt to send it. Retries, the
ledger, pacing and undeliverable records belong to `bridge.delivery`.
"""

from __future__ import annotations

from typing import Any, Protocol

from bridge.core.models import Alert, Notification


class Sink(Protocol):
    name: str

    def render(self, alert: Alert) -> dict[str, Any]:
        """The body this sink would send (used by `summarize` dry runs)."""
        ...

    async def send(self, alert: Alert) -> None:
        """One attempt. Raises SinkRetryable or SinkPermanent on failure."""
        ...

    def render_group(self, notification: Notification) -> dict[str, Any]:
        """A group's body; a group of one (`kind == "single"`) is exactly `render(first)`."""
        ...

    async def send_group(self, notification: Notification) -> None:
        """One attempt for a group notification (same errors as `send`)."""
        ...
