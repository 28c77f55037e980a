"""The drain's depth gauges: one `dlq_bridge_dlq_depth` series per tracked DLQ or kind source, and
the `sources` health check (DLQs waiting over `sources.max_sources`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bridge.health import Health, Status
from bridge.metrics import Metrics
from bridge.redact import redact_key_name
from bridge.sources.kinds import KindSource

log = logging.getLogger(__name__)


class DepthView:
    """Keeps the depth series in step with what is tracked; a series leaves with its DLQ."""

    def __init__(self, metrics: Metrics, health: Health) -> None:
        self._metrics = metrics
        self._health = health
        self.labels: dict[str, int] = {}

    async def kind_depths(self, kinds: Sequence[KindSource]) -> dict[str, int]:
        """Depth per kind source, by source name; a source that cannot answer keeps its last value."""
        depths: dict[str, int] = {}
        for source in kinds:
            try:
                rescan = getattr(source, "rescan", None)
                if rescan is not None:
                    await rescan()  # watched kinds: new BullMQ / RQ queues
                depths[source.name] = await source.depth()
            except Exception as exc:
                log.warning("depth of source %s unavailable (%s)", source.name, type(exc).__name__)
                if source.name in self.labels:
                    depths[source.name] = self.labels[source.name]
        return depths

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
