"""The composition root: builds every component once from Settings."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

import httpx
import redis.asyncio as redis

from bridge.clients.embedded import EmbeddedRedis
from bridge.clients.http import build_http_client
from bridge.clients.redis_client import build_redis
from bridge.clients.redis_memory import RedisMemory
from bridge.core.formats import RecordFormat
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.release import announcement, poses_as_next, version
from bridge.core.urls import mask_url
from bridge.delivery.assembly import build_delivery, build_dispatcher, build_groupers, settings_concurrency
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.fleet import FleetFormat
from bridge.delivery.supervisor import DeliverySupervisor
from bridge.drain.pipeline import Pipeline
from bridge.drain.traced import TracedPipeline
from bridge.settings import Settings
from bridge.sources.build import Built, build_kind_sources
from bridge.sources.kind_port import kind_ports
from bridge.sources.redis_list import RedisListSource
from bridge.stores.archive import quarantine_depth
from bridge.stores.search_index import SearchIndex
from bridge.stores.seen_before import SeenBeforeStore
from bridge.stores.trends import TrendCounter, TrendStore
from bridge.stores.undeliverable_records import UndeliverableStore
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from bridge.summarize.summarizer import Summarizer
from bridge.telemetry.build import build_telemetry
from bridge.telemetry.port import NO_TELEMETRY, Telemetry

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    redis: redis.Redis
    http: httpx.AsyncClient
    metrics: Metrics
    health: Health
    runbooks: RunbookCatalog
    summarizer: Summarizer
    dispatcher: Dispatcher
    source: RedisListSource
    pipeline: Pipeline
    delivery: DeliverySupervisor
    kinds: Built
    memory: RedisMemory
    formats: RecordFormat
    version: str
    telemetry: Telemetry = NO_TELEMETRY


def redis_url(settings: Settings, stack: contextlib.ExitStack) -> str:
    """The configured URL, or an embedded server started (and stopped) with the stack."""
    if settings.redis.url is not None:
        return settings.redis.url.get_secret_value()
    embedded = EmbeddedRedis(settings.redis.data_dir, settings.redis.embedded_port)
    url = embedded.start()
    stack.callback(embedded.stop)
    log.info("no [redis] url configured: using embedded Redis at %s", url)
    return url


def mask_redis_url(url: str) -> str:
    """The Redis URL for logs: host, port and database; never a password."""
    return mask_url(url, keep_path=True)


def redis_pool_size(settings: Settings) -> int:
    """Room for every pipeline worker and every sink delivery in flight at once, plus the loops."""
    per_sink = [settings_concurrency(settings, s) for s in settings.effective_sinks()]
    return settings.sources.concurrency * 2 + sum(per_sink) + 32


def runbook_url_builder(settings: Settings, runbooks: RunbookCatalog):  # type: ignore[no-untyped-def]
    base = settings.runbooks.base_url

    def url_for(hint: str) -> str | None:
        if not base or runbooks.get(hint) is None:
            return None
        return f"{base.rstrip('/')}/{hint}.md"

    return url_for


def pipeline_class(telemetry: Telemetry) -> Callable[..., Pipeline]:
    """The plain drain with tracing off (not one span call on the hot path), else the traced one."""
    if not telemetry.enabled:
        return Pipeline
    return functools.partial(TracedPipeline, telemetry=telemetry)


@contextlib.contextmanager
def log_ids(telemetry: Telemetry) -> Iterator[None]:
    """Trace and span ids on the log records while tracing is on (bridge.telemetry.logs)."""
    if not telemetry.enabled:
        yield
        return
    from bridge.telemetry.logs import install_log_ids

    undo = install_log_ids(logging.getLogger())
    try:
        yield
    finally:
        undo()


def freeze_heap() -> None:
    """Collect once, then move everything alive after start-up (modules, settings, clients,
    compiled patterns) out of the collector's sight: later collections only walk objects
    made while draining (docs/benchmarks.md: less CPU in the garbage collector per entry)."""
    gc.collect()
    gc.freeze()


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    stdout: TextIO | None = None,
    cache_writes: bool = True,
    daily_tokens: bool = True,
) -> AsyncIterator[Runtime]:
    """Build, yield and finally close every component (`cache_writes=False`: a read-only summary cache;
    `daily_tokens=False`: the model's calls are not added to the console's tokens per day)."""
    with contextlib.ExitStack() as stack:
        url = redis_url(settings, stack)
        runbooks = RunbookCatalog.load(settings.runbooks.dir)
        client = build_redis(url, settings.redis, max_connections=redis_pool_size(settings))
        http = build_http_client(settings.http, transport)
        metrics, health = Metrics(), Health()
        pose = poses_as_next()
        formats, release = RecordFormat.of_release(pose), version(pose)
        metrics.build_info.labels(release, str(formats.reads)).set(1)
        metrics.record_format_written.set(formats.writes)
        memory = RedisMemory(client, metrics, count_quarantined=lambda: quarantine_depth(client))
        kinds = Built([])
        telemetry = build_telemetry(settings.tracing, release)
        stack.enter_context(log_ids(telemetry))
        trends = TrendCounter(TrendStore(client), time.time)
        try:
            summarizer = build_summarizer(
                settings, runbooks, client, http, metrics, health,
                cache_writes=cache_writes, batch_cache_writes=cache_writes, formats=formats, telemetry=telemetry,
                on_tokens=trends.count_tokens if daily_tokens else None,
            )
            dispatcher = build_dispatcher(settings, client, http, metrics, health, stdout, formats=formats,
                                          telemetry=telemetry)
            source = RedisListSource(client, settings.sources, settings.redis.consumer_id,
                                     announce=announcement(release, formats))
            kinds = build_kind_sources(
                settings.sources, bridge=client, consumer_id=settings.redis.consumer_id, redis=settings.redis
            )
            undeliverable = UndeliverableStore(client, metrics, settings.delivery.undeliverable_max, formats)
            groupers = build_groupers(client, dispatcher, metrics, settings.delivery.lease_s, formats)
            fleet = FleetFormat(client, formats, settings.redis.consumer_id, metrics)
            delivery = build_delivery(settings, client, dispatcher, metrics, health, undeliverable, groupers,
                                      formats=formats, fleet=fleet)
            pipeline = pipeline_class(telemetry)(
                source,
                summarizer,
                dispatcher,
                undeliverable,
                settings.sources,
                metrics,
                health,
                runbook_url_builder(settings, runbooks),
                settings.severity,
                redis_target=mask_redis_url(url),
                handoff=delivery.handoff,
                delivery=delivery,
                kinds=kind_ports(kinds.sources, client, settings.redis.consumer_id,
                                 heartbeat_ttl_s=settings.sources.heartbeat_ttl_s,
                                 archive_max=settings.sources.archive_max),
                memory=memory,
                fleet=fleet,
                search_index=SearchIndex(client),
                trends=trends,
                trace_link=settings.tracing.trace_link,
                seen_before=SeenBeforeStore(client),
            )
            yield Runtime(
                settings, client, http, metrics, health, runbooks, summarizer, dispatcher, source, pipeline, delivery,
                kinds, memory, formats, release, telemetry,
            )
            await dispatcher.aclose()
            await summarizer.aclose()
            await trends.close()  # the last FLUSH_S of counts
        finally:
            await kinds.close()
            await http.aclose()
            await client.aclose()
            if telemetry.enabled:  # flushes what is queued, bounded by the export timeout
                await asyncio.to_thread(telemetry.shutdown)
