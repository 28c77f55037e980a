"""Prometheus metrics, held by one object built at start and passed down.

Each Metrics owns its own CollectorRegistry, so tests and several bridges in
one process never collide.
"""

from __future__ import annotations

from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

M = TypeVar("M", Counter, Gauge, Histogram)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    """Every metric the bridge exports (names are part of the operator contract)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.dlq_depth = Gauge("dlq_bridge_dlq_depth", "Entries waiting in each DLQ", ["source"], registry=r)
        self.sources_tracked = Gauge(
            "dlq_bridge_sources_tracked", "DLQs this consumer serves now (at most sources.max_sources)", registry=r
        )
        self.sources_waiting = Gauge(
            "dlq_bridge_sources_waiting",
            "Non-empty DLQs over sources.max_sources, waiting for their turn",
            registry=r,
        )
        self.source_up = Gauge(
            "dlq_bridge_source_up",
            "1 while a configured kind source (Sidekiq, BullMQ, RQ, Dramatiq, stream, RabbitMQ, SQS) can be read, "
            "0 while not",
            ["source"],
            registry=r,
        )
        self.resolves_queued = Counter(
            "dlq_bridge_resolves_queued_total",
            "Alerted jobs seen leaving a watched store by hand (retried, deleted), their resolve queued",
            ["source", "reason"],
            registry=r,
        )
        self.processing_depth = Gauge("dlq_bridge_processing_depth", "Entries claimed and not finished", registry=r)
        self.entries = Counter(
            "dlq_bridge_entries_total",
            "Dead letters finished, by outcome (alerted, poison, error, quarantined)",
            ["outcome"],
            registry=r,
        )
        self.entry_seconds = Histogram(
            "dlq_bridge_entry_seconds",
            "Claim to finish, per entry",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.summaries = Counter(
            "dlq_bridge_summaries_total",
            "Summaries by source (openclaw, cache, fallback) and fallback reason",
            ["source", "reason"],
            registry=r,
        )
        self.summary_repairs = Counter(
            "dlq_bridge_summary_repairs_total",
            "Model reply fields repaired instead of falling back (runbook_hint, severity, next_steps, ...)",
            ["field"],
            registry=r,
        )
        self.summary_tokens = Counter(
            "dlq_bridge_summary_tokens_total",
            "Tokens of gateway calls, by model, the summary they ended in (openclaw, fallback) and kind",
            ["model", "source", "kind"], registry=r,
        )
        self.summary_tokens_estimated = Counter(
            "dlq_bridge_summary_tokens_estimated_total",
            "Gateway calls whose reply carried no usage: their tokens were estimated (characters / 4)",
            ["model"], registry=r,
        )
        self.gateway_seconds = Histogram(
            "dlq_bridge_gateway_request_seconds",
            "OpenClaw gateway call latency, by outcome",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.gateway_waits = Counter(
            "dlq_bridge_gateway_waits_total",
            "Gateway 429 pauses waited out (at most openclaw.max_wait_s) instead of falling back",
            registry=r,
        )
        self.gateway_circuit_open = Gauge(
            "dlq_bridge_gateway_circuit_open", "1 while the gateway circuit is open", registry=r
        )
        self.deliveries = Counter(
            "dlq_bridge_deliveries_total",
            "Final delivery outcomes by sink (delivered, duplicate, undeliverable)",
            ["sink", "outcome"],
            registry=r,
        )
        self.delivery_attempts = Counter(
            "dlq_bridge_delivery_attempts_total",
            "Delivery attempts by sink and outcome (ok, retryable, permanent)",
            ["sink", "outcome"],
            registry=r,
        )
        self.delivery_seconds = Histogram(
            "dlq_bridge_delivery_seconds",
            "Time to a final delivery outcome, by sink",
            ["sink"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.sink_queue_depth = Gauge(
            "dlq_bridge_sink_queue_depth", "Alerts handed off to a sink, not yet delivered (queued + leased)",
            ["sink"], registry=r,
        )
        self.sink_queue_oldest_age = Gauge(
            "dlq_bridge_sink_queue_oldest_age_seconds", "Age of the oldest alert in a sink's queue (0 when empty)",
            ["sink"], registry=r,
        )
        self.rate_limit_waits = Counter(
            "dlq_bridge_rate_limit_waits_total",
            "Sends that waited for the fleet-wide rate limit of their receiver, by sink",
            ["sink"],
            registry=r,
        )
        self.rate_limit_wait_seconds = Counter(
            "dlq_bridge_rate_limit_wait_seconds_total",
            "Seconds spent waiting for the fleet-wide rate limit, by sink",
            ["sink"],
            registry=r,
        )
        self.undeliverable_depth = Gauge(
            "dlq_bridge_undeliverable_depth", "Records in dlq_bridge:undeliverable", registry=r
        )
        self.archive_trimmed = Counter(
            "dlq_bridge_archive_trimmed_total",
            "Oldest archived entries of a source dropped at sources.archive_max (the DLQ entry itself was alerted)",
            ["source"],
            registry=r,
        )
        self.undeliverable_trimmed = Counter(
            "dlq_bridge_undeliverable_trimmed_total",
            "Oldest undeliverable records trimmed at delivery.undeliverable_max",
            registry=r,
        )
        self.reaped = Counter(
            "dlq_bridge_reaped_entries_total",
            "Entries returned to their DLQ from processing lists (own recovery or reaper)",
            registry=r,
        )
        self.open_groups = Gauge(
            "dlq_bridge_open_groups", "Alert groups not yet closed, per sink", ["sink"], registry=r
        )
        self.notifications = Counter(
            "dlq_bridge_notifications_total",
            "Group notifications delivered, by sink and kind (single, digest, repeat)",
            ["sink", "kind"],
            registry=r,
        )
        self.replica_waits = Counter(
            "dlq_bridge_replica_wait_total",
            "WAITs for redis.wait_replicas after a hand-off or forward, by outcome (ok, timeout)",
            ["outcome"],
            registry=r,
        )
        self.silenced = Counter(
            "dlq_bridge_silenced_total",
            "Alerts not handed to a sink because a console silence matched them, by sink",
            ["sink"],
            registry=r,
        )
        self.redis_memory_used = Gauge(
            "dlq_bridge_redis_memory_used_bytes", "used_memory of the bridge's Redis (the fullest master)", registry=r
        )
        self.redis_memory_max = Gauge(
            "dlq_bridge_redis_memory_max_bytes", "maxmemory of the bridge's Redis (the fullest master; 0: no limit)",
            registry=r,
        )
        self.quarantine_depth = Gauge(
            "dlq_bridge_quarantine_depth",
            "Entries in the dlq_bridge:quarantine:* lists (never trimmed; counted every minute)",
            registry=r,
        )
        self.loop_tick = Gauge("dlq_bridge_loop_tick_timestamp_seconds", "Last tick of the main loop", registry=r)
        self.build_info = Gauge(
            "dlq_bridge_build_info", "1, labelled with this replica's version and the newest record format it reads",
            ["version", "reads"], registry=r,
        )
        self.record_format_written = Gauge(
            "dlq_bridge_record_format_written",
            "The record format this replica writes: the newest every live replica reads (docs/operations.md)",
            registry=r,
        )
        self.newer_format_items = Gauge(
            "dlq_bridge_newer_format_items",
            "Queued items of a record format newer than this replica reads, waiting for a replica that reads it",
            ["sink"], registry=r,
        )
        self.newer_format_left = Counter(
            "dlq_bridge_newer_format_left_total",
            "Records of a newer format this replica left for a newer replica, by where (a sink, groups:<sink>)",
            ["where"], registry=r,
        )

    def child(self, metric: M, *values: str) -> M:
        """`metric.labels(*values)`, looked up once (hot paths count on it per entry).

        Only for series that are never removed (counters and histograms by outcome or sink).
        """
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)
