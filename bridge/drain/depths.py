"""The drain's depth gauges: one `dlq_bridge_dlq_depth` series per tracked DLQ or kind source, and
the `sources` health check (DLQs waiting over `sources.max_sources`)."""

from __future__ import annotations

from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.intake.redact import redact_key_name


class DepthView:
    """Keeps the depth series in step with what is tracked; a series leaves with its DLQ."""

    def __init__(self, metrics: Metrics, health: Health) -> None:
        self._metrics = metrics
        self._health = health
        self.labels: dict[str, int] = {}

    def show(self, depths: dict[str, int]) -> None:
        """One depth series per tracked DLQ; a series leaves with its DLQ (sticky window, cap)."""
        shown = {redact_key_name(source): depth for source, depth in depths.items()}
        for label in set(self.labels) - set(shown):
            self._metrics.dlq_depth.remove(label)
        for label, depth in shown.items():
            if self.labels.get(label) != depth:
                self._metrics.dlq_depth.labels(label).set(depth)
        self.labels = shown

    def show_waiting(self, waiting: int) -> None:
        self._metrics.sources_tracked.set(len(self.labels))
        self._metrics.sources_waiting.set(waiting)
        if waiting:
            detail = f"{waiting} DLQs over sources.max_sources wait for their turn"
            self._health.set("sources", Status.DEGRADED, detail)
        else:
            self._health.set("sources", Status.OK, f"{len(self.labels)} tracked")
