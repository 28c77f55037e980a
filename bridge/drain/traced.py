"""`TracedPipeline`: the drain's chain with the bridge's own spans (tracing on only; docs/tracing.md).

Thin wrappers around the stages of `Pipeline`: one root span per dead letter (`process <source>`,
its `claim` child from the claim to now), `intake`, `summarize` and `hand-off` children, the root
linked to the job's own trace, and the root's context stored with the alert (`Alert.bridge_trace`)
so that each sink's delivery, on whichever replica takes it, continues the trace. With tracing off
the runtime builds the plain `Pipeline`: not one call of this module runs.
"""

from __future__ import annotations

from typing import Any

from bridge.core.claimed import Claimed
from bridge.core.models import Alert, DeadLetter
from bridge.drain.pipeline import Pipeline
from bridge.intake.redact import redact_key_name
from bridge.sources.source import Source
from bridge.telemetry.attributes import messaging_system
from bridge.telemetry.port import AttributeValue, SpanHandle, Telemetry


class TracedPipeline(Pipeline):
    def __init__(self, *args: Any, telemetry: Telemetry, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._telemetry = telemetry
        self._roots: dict[int, SpanHandle] = {}  # by id() of the claimed entry in flight

    async def process(self, claimed: Claimed, source: Source) -> None:
        system, shown = messaging_system(claimed.origin), redact_key_name(claimed.source_key)
        with self._telemetry.entry(shown, claimed.claimed_at, claimed.claims, system) as root:
            self._roots[id(claimed)] = root
            try:
                await super().process(claimed, source)
            finally:
                self._roots.pop(id(claimed), None)

    async def _intake(self, claimed: Claimed) -> DeadLetter:
        with self._telemetry.stage("intake"):
            letter = await super()._intake(claimed)
        root = self._roots.get(id(claimed))
        if root is not None:
            root.link(letter.traceparent, "job")  # the trace of the job that failed
            root.set("messaging.message.id", letter.job_id)
            root.set("dlq_bridge.queue", letter.queue)
            root.set("dlq_bridge.poison", letter.parse_error is not None)
        return letter

    async def _alert_for(self, dead_letter: DeadLetter) -> Alert:
        with self._telemetry.stage("summarize") as span:
            alert = await super()._alert_for(dead_letter)
            span.set("dlq_bridge.summary.source", alert.summary.source.value)
            span.set("dlq_bridge.summary.fallback_reason", alert.summary.fallback_reason)
            span.set("dlq_bridge.severity", alert.severity.value)
        return alert

    async def _hand_off(self, claimed: Claimed, alert: Alert, routed: list[str], *, quarantine: bool = False) -> bool:
        if alert.bridge_trace is None:  # the root's context travels with the queued alert
            alert = alert.model_copy(update={"bridge_trace": self._telemetry.current_traceparent()})
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "redis",
            "messaging.operation.type": "send",
            "messaging.operation.name": "hand-off",
            "messaging.batch.message_count": len(routed),
            "dlq_bridge.sinks": routed,
            "dlq_bridge.quarantine": quarantine,
        }
        with self._telemetry.stage("hand-off", **attributes) as span:
            finished = await super()._hand_off(claimed, alert, routed, quarantine=quarantine)
            span.set("dlq_bridge.reaped", not finished)
        return finished
