"""The builders of the built-in kinds (docs/design.md, section 2b), one function per kind.

Connection strings come from the environment variables the tables name; a missing one is a
configuration error that names the variable, never its value. The cursors of watched stores
always live in the bridge's own Redis.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from bridge.clients.postgres import PgReader
from bridge.core.errors import ConfigError
from bridge.sources.bullmq import bullmq_source
from bridge.sources.dramatiq_xq import dramatiq_source
from bridge.sources.kind_plugin import KindContext
from bridge.sources.kind_settings import (
    BullMQSourceSettings,
    DramatiqSourceSettings,
    RabbitMQSourceSettings,
    RedisStreamSourceSettings,
    RQSourceSettings,
    SidekiqSourceSettings,
    SqsSourceSettings,
    WatchedSettings,
)
from bridge.sources.kinds import KindReader
from bridge.sources.pg_boss import pgboss_source
from bridge.sources.pg_delayed_job import delayed_job_source
from bridge.sources.pg_procrastinate import procrastinate_source
from bridge.sources.pg_settings import (
    DelayedJobSourceSettings,
    PgBossSourceSettings,
    PgWatchedSettings,
    ProcrastinateSourceSettings,
)
from bridge.sources.rabbitmq import RabbitMQSource
from bridge.sources.redis_stream import RedisStreamSource
from bridge.sources.rq import rq_source
from bridge.sources.sidekiq import sidekiq_source
from bridge.sources.sqs import SqsSource, sqs_client
from bridge.sources.watched import WatchedSource


def _checked(cfg: WatchedSettings | PgWatchedSettings, source: WatchedSource) -> WatchedSource:
    source.leave_check_s = cfg.leave_check_s
    return source


def sidekiq(cfg: SidekiqSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    store = ctx.store(cfg.redis_url_env, name)
    return _checked(cfg, sidekiq_source(
        name, store, ctx.bridge, namespace=cfg.namespace, lease_s=cfg.lease_s,
        dead_max_jobs=cfg.dead_max_jobs, dead_timeout_s=cfg.dead_timeout_s,
    ))


def bullmq(cfg: BullMQSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    store = ctx.store(cfg.redis_url_env, name)
    source = bullmq_source(name, store, ctx.bridge, prefix=cfg.prefix, queues=cfg.queues, lease_s=cfg.lease_s)
    return _checked(cfg, source)


def rq(cfg: RQSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    store = ctx.store(cfg.redis_url_env, name)
    return _checked(cfg, rq_source(name, store, ctx.bridge, queues=cfg.queues, lease_s=cfg.lease_s))


def dramatiq(cfg: DramatiqSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    store = ctx.store(cfg.redis_url_env, name)
    source = dramatiq_source(
        name, store, ctx.bridge, namespace=cfg.namespace, queues=cfg.queues,
        dead_message_ttl_s=cfg.dead_message_ttl_s, lease_s=cfg.lease_s,
    )
    return _checked(cfg, source)


def redis_stream(cfg: RedisStreamSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    return RedisStreamSource(
        name,
        ctx.store(cfg.redis_url_env, name),
        stream=cfg.stream,
        group=cfg.group,
        consumer=ctx.consumer_id,
        min_idle_ms=int(cfg.min_idle_s * 1000),
    )


def rabbitmq(cfg: RabbitMQSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    ctx.needs("aio_pika", "aio-pika", name)
    return RabbitMQSource(name, ctx.env(cfg.url_env, name), queue=cfg.queue, prefetch=cfg.prefetch)


def sqs(cfg: SqsSourceSettings, ctx: KindContext) -> KindReader:
    ctx.needs("boto3", "boto3", cfg.source_name())
    region = cfg.region or cfg.region_from_url() or ctx.environ.get("AWS_REGION")
    region = region or ctx.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise ConfigError([f"source {cfg.source_name()}: set `region` (or AWS_REGION)"])
    client = sqs_client(region=region, endpoint_url=cfg.endpoint_url)
    return SqsSource(
        cfg.source_name(), client, queue_url=cfg.queue_url, visibility_timeout_s=cfg.visibility_timeout_s
    )


def pg_reader(cfg: PgWatchedSettings, ctx: KindContext) -> PgReader:
    """The source's read-only PostgreSQL session; its URL from `url_env` or `url_file`, never in an error."""
    name = cfg.source_name()
    ctx.needs("psycopg", "psycopg[binary]", name)
    if cfg.url_env is not None:
        url = ctx.env(cfg.url_env, name)
    else:
        try:
            url = Path(str(cfg.url_file)).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"source {name}: cannot read url_file {cfg.url_file} ({type(exc).__name__})"]) from None
        if not url:
            raise ConfigError([f"source {name}: url_file {cfg.url_file} is empty"])
    return PgReader(SecretStr(url), application_name=f"dlq-bridge {name}")


def pgboss(cfg: PgBossSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    source = pgboss_source(
        name, pg_reader(cfg, ctx), ctx.bridge, schema=cfg.schema_name, queues=cfg.queues, lease_s=cfg.lease_s,
        poll_s=cfg.poll_s, settle_s=cfg.settle_s, archive_failed_after_s=cfg.archive_failed_after_s,
    )
    return _checked(cfg, source)


def procrastinate(cfg: ProcrastinateSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    source = procrastinate_source(
        name, pg_reader(cfg, ctx), ctx.bridge, schema=cfg.schema_name, queues=cfg.queues, lease_s=cfg.lease_s,
        poll_s=cfg.poll_s, settle_s=cfg.settle_s,
    )
    return _checked(cfg, source)


def delayed_job(cfg: DelayedJobSourceSettings, ctx: KindContext) -> KindReader:
    name = cfg.source_name()
    source = delayed_job_source(
        name, pg_reader(cfg, ctx), ctx.bridge, schema=cfg.schema_name, table=cfg.table, queues=cfg.queues,
        lease_s=cfg.lease_s, poll_s=cfg.poll_s, settle_s=cfg.settle_s,
    )
    return _checked(cfg, source)
