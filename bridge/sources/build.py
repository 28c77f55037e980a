"""Build the kind readers from their configuration (docs/design.md, section 2b).

Connection strings come from the environment variables the tables name; a missing one is a
configuration error that names the variable, never its value. The cursors of watched stores
always live in the bridge's own Redis.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from bridge.errors import ConfigError
from bridge.sources.bullmq import bullmq_source
from bridge.sources.config import (
    BullMQSourceSettings,
    KindSources,
    RabbitMQSourceSettings,
    RedisStreamSourceSettings,
    RQSourceSettings,
    SidekiqSourceSettings,
    SqsSourceSettings,
    _Watched,
)
from bridge.sources.kinds import KindSource
from bridge.sources.rabbitmq import RabbitMQSource
from bridge.sources.redis_stream import RedisStreamSource
from bridge.sources.rq import rq_source
from bridge.sources.sidekiq import sidekiq_source
from bridge.sources.sqs import SqsSource, sqs_client
from bridge.sources.watched import WatchedSource


@dataclass
class Built:
    sources: list[KindSource]
    clients: list[aioredis.Redis] = field(default_factory=list)  # opened here: close on shutdown

    async def close(self) -> None:
        for source in self.sources:
            await source.close()
        for client in self.clients:
            await client.aclose()


KINDS_EXTRA = "pip install 'dlq-bridge[kinds]'"


def _needs(module: str, package: str, owner: str) -> None:
    """A kind whose client library is not installed is a configuration error, not a crash later."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError([f"source {owner}: needs the Python package {package}: {KINDS_EXTRA}"])


def _env(environ: Mapping[str, str], name: str, owner: str) -> str:
    value = environ.get(name, "").strip()
    if not value:
        raise ConfigError([f"source {owner}: environment variable {name} is not set"])
    return value


def _checked(cfg: _Watched, source: WatchedSource) -> WatchedSource:
    source.leave_check_s = cfg.leave_check_s
    return source


class _Builder:
    def __init__(self, bridge: aioredis.Redis, consumer_id: str, environ: Mapping[str, str]) -> None:
        self.bridge = bridge
        self.consumer_id = consumer_id
        self.environ = environ
        self.clients: list[aioredis.Redis] = []

    def store(self, redis_url_env: str | None, owner: str) -> aioredis.Redis:
        if redis_url_env is None:
            return self.bridge
        client = aioredis.Redis.from_url(_env(self.environ, redis_url_env, owner))
        self.clients.append(client)
        return client

    def sidekiq(self, cfg: SidekiqSourceSettings) -> KindSource:
        name = cfg.source_name()
        store = self.store(cfg.redis_url_env, name)
        return _checked(cfg, sidekiq_source(
            name, store, self.bridge, namespace=cfg.namespace, lease_s=cfg.lease_s,
            dead_max_jobs=cfg.dead_max_jobs, dead_timeout_s=cfg.dead_timeout_s,
        ))

    def bullmq(self, cfg: BullMQSourceSettings) -> KindSource:
        name = cfg.source_name()
        store = self.store(cfg.redis_url_env, name)
        source = bullmq_source(name, store, self.bridge, prefix=cfg.prefix, queues=cfg.queues, lease_s=cfg.lease_s)
        return _checked(cfg, source)

    def rq(self, cfg: RQSourceSettings) -> KindSource:
        name = cfg.source_name()
        store = self.store(cfg.redis_url_env, name)
        return _checked(cfg, rq_source(name, store, self.bridge, queues=cfg.queues, lease_s=cfg.lease_s))

    def stream(self, cfg: RedisStreamSourceSettings) -> KindSource:
        name = cfg.source_name()
        return RedisStreamSource(
            name,
            self.store(cfg.redis_url_env, name),
            stream=cfg.stream,
            group=cfg.group,
            consumer=self.consumer_id,
            min_idle_ms=int(cfg.min_idle_s * 1000),
        )

    def rabbitmq(self, cfg: RabbitMQSourceSettings) -> KindSource:
        name = cfg.source_name()
        url = _env(self.environ, cfg.url_env, name)
        _needs("aio_pika", "aio-pika", name)
        return RabbitMQSource(name, url, queue=cfg.queue, prefetch=cfg.prefetch)

    def sqs(self, cfg: SqsSourceSettings) -> KindSource:
        _needs("boto3", "boto3", cfg.source_name())
        region = cfg.region or cfg.region_from_url() or self.environ.get("AWS_REGION")
        region = region or self.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise ConfigError([f"source {cfg.source_name()}: set `region` (or AWS_REGION)"])
        client = sqs_client(region=region, endpoint_url=cfg.endpoint_url)
        return SqsSource(
            cfg.source_name(), client, queue_url=cfg.queue_url, visibility_timeout_s=cfg.visibility_timeout_s
        )


def build_kind_sources(
    kinds: KindSources, *, bridge: aioredis.Redis, consumer_id: str, environ: Mapping[str, str] | None = None
) -> Built:
    """One reader per configured table, in the order: sidekiq, bullmq, rq, redis_stream, rabbitmq, sqs."""
    builder = _Builder(bridge, consumer_id, os.environ if environ is None else environ)
    sources: list[KindSource] = [builder.sidekiq(c) for c in kinds.sidekiq]
    sources += [builder.bullmq(c) for c in kinds.bullmq]
    sources += [builder.rq(c) for c in kinds.rq]
    sources += [builder.stream(c) for c in kinds.redis_stream]
    sources += [builder.rabbitmq(c) for c in kinds.rabbitmq]
    sources += [builder.sqs(c) for c in kinds.sqs]
    return Built(sources, builder.clients)


def check_kind_prerequisites(kinds: KindSources, environ: Mapping[str, str] | None = None) -> None:
    """Before `run` starts: every client library and connection variable the kind tables need,
    so a missing one is one line and exit 2, not a traceback from inside the server's start-up."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    stores: list[_Watched | RedisStreamSourceSettings] = [*kinds.sidekiq, *kinds.bullmq, *kinds.rq]
    stores += kinds.redis_stream
    needs: list[tuple[str, str | None, str | None]] = [(c.source_name(), c.redis_url_env, None) for c in stores]
    needs += [(c.source_name(), c.url_env, "aio-pika") for c in kinds.rabbitmq]
    needs += [(c.source_name(), None, "boto3") for c in kinds.sqs]
    for owner, url_env, package in needs:
        try:
            if url_env is not None:
                _env(environ, url_env, owner)
            if package is not None:
                _needs(package.replace("-", "_"), package, owner)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
