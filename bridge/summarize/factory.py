"""Chooses the summarizer from settings: OpenClaw with fallback, or fallback only."""

from __future__ import annotations

import httpx
import redis.asyncio as redis

from bridge.core.formats import RecordFormat
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.settings import Settings
from bridge.stores.gateway_gate import FleetGate
from bridge.stores.summary_cache import SummaryCache
from bridge.summarize.fallback import FallbackSummarizer
from bridge.summarize.openclaw import GatewayClient
from bridge.summarize.openclaw_summarizer import OpenClawSummarizer
from bridge.summarize.prompt import load_system_prompt
from bridge.summarize.reply import validate_draft
from bridge.summarize.runbooks import RunbookCatalog
from bridge.summarize.summarizer import Summarizer
from bridge.summarize.tokens import TokenSink
from bridge.telemetry.port import NO_TELEMETRY, Telemetry


def build_summarizer(
    settings: Settings,
    runbooks: RunbookCatalog,
    client: redis.Redis,
    http: httpx.AsyncClient,
    metrics: Metrics,
    health: Health,
    *,
    cache_writes: bool = True,
    batch_cache_writes: bool = False,
    formats: RecordFormat | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    on_tokens: TokenSink | None = None,
) -> Summarizer:
    """`cache_writes=False` keeps the summary cache read-only (`summarize` without --cache);
    `batch_cache_writes`: answers written a few ms later in batches (the service's drain);
    `on_tokens`: where each model call's tokens go besides the metrics (the console's per-day counts)."""
    fallback = FallbackSummarizer(runbooks, settings.severity_for)
    oc = settings.openclaw
    if oc is None:
        health.set("gateway", Status.OK, "disabled: fallback summaries")
        return fallback
    ids = runbooks.ids()
    return OpenClawSummarizer(
        oc,
        GatewayClient(oc, http, metrics, ids),
        SummaryCache(
            client, oc.cache_ttl_s, ids, validate=validate_draft, writes=cache_writes,
            batch_writes=batch_cache_writes, formats=formats,
        ),
        fallback,
        ids,
        load_system_prompt(),
        metrics,
        health,
        gate=FleetGate(client, oc),
        runbook_base=settings.runbooks.base_url,
        telemetry=telemetry,
        on_tokens=on_tokens,
    )
