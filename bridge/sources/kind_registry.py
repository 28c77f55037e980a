"""Every source kind the bridge knows, in build order: one line per plug-in
(docs/architecture.md, "How to add a source kind").

`[[sources.<kind>]]` tables, the build, `check`, `peek`, `redrive` and the config reference
read this list; nothing else names the kinds.
"""

from __future__ import annotations

from typing import cast

from bridge.sources import builders
from bridge.sources.kind_plugin import KindPlugin, KindRegistry, KindTablesBase
from bridge.sources.kind_settings import (
    BullMQSourceSettings,
    DramatiqSourceSettings,
    RabbitMQSourceSettings,
    RedisStreamSourceSettings,
    RQSourceSettings,
    SidekiqSourceSettings,
    SqsSourceSettings,
)
from bridge.sources.pg_settings import DelayedJobSourceSettings, PgBossSourceSettings, ProcrastinateSourceSettings

KINDS = KindRegistry([
    KindPlugin("sidekiq", SidekiqSourceSettings, builders.sidekiq,
               "`[[sources.sidekiq]]`: Sidekiq dead sets, watched (see docs/sources.md).",
               "Sidekiq Web (the Dead tab) retries these jobs"),
    KindPlugin("bullmq", BullMQSourceSettings, builders.bullmq,
               "`[[sources.bullmq]]`: BullMQ failed sets, watched (see docs/sources.md).",
               "Bull Board (or Taskforce.sh) retries these jobs"),
    KindPlugin("rq", RQSourceSettings, builders.rq,
               "`[[sources.rq]]`: RQ failed registries, watched (see docs/sources.md).",
               "rq-dashboard (or `rq requeue`) retries these jobs"),
    KindPlugin("dramatiq", DramatiqSourceSettings, builders.dramatiq,
               "`[[sources.dramatiq]]`: Dramatiq dead-letter queues on Redis, watched (see docs/sources.md).",
               "dramatiq-dashboard (or `broker.enqueue` of the dead message) retries these messages"),
    KindPlugin("pgboss", PgBossSourceSettings, builders.pgboss,
               "`[[sources.pgboss]]`: pg-boss failed jobs in PostgreSQL, watched (see docs/sources.md).",
               "pg-boss's `retry` (or a pg-boss dashboard) retries these jobs",
               requires=("psycopg", "psycopg[binary]")),
    KindPlugin("procrastinate", ProcrastinateSourceSettings, builders.procrastinate,
               "`[[sources.procrastinate]]`: Procrastinate failed jobs in PostgreSQL, watched (see docs/sources.md).",
               "Procrastinate's retry (its Django admin, or `JobManager.retry_job_by_id`) retries these jobs",
               requires=("psycopg", "psycopg[binary]")),
    KindPlugin("delayed_job", DelayedJobSourceSettings, builders.delayed_job,
               "`[[sources.delayed_job]]`: Delayed Job failed rows in PostgreSQL, watched (see docs/sources.md).",
               "delayed_job_web (Requeue: failed_at = NULL) retries these jobs",
               requires=("psycopg", "psycopg[binary]")),
    KindPlugin("redis_stream", RedisStreamSourceSettings, builders.redis_stream,
               "`[[sources.redis_stream]]`: dead-letter streams, consumed (see docs/sources.md).",
               "your stream's producer re-adds these entries (XADD to the work stream)"),
    KindPlugin("rabbitmq", RabbitMQSourceSettings, builders.rabbitmq,
               "`[[sources.rabbitmq]]`: queues bound to a dead-letter exchange, consumed (see docs/sources.md).",
               "the RabbitMQ management UI (a shovel, or Celery's own tools) moves these messages back",
               requires=("aio_pika", "aio-pika")),
    KindPlugin("sqs", SqsSourceSettings, builders.sqs,
               "`[[sources.sqs]]`: SQS dead-letter queues, consumed (see docs/sources.md).",
               "the SQS console's DLQ redrive (StartMessageMoveTask) moves these messages back",
               requires=("boto3", "boto3")),
])

KindSources = KINDS.tables_model("KindSources", KindTablesBase)
"""The kind arrays of a `[sources]` table alone (other keys ignored)."""


def kind_sources(sources_table: dict[str, object]) -> KindTablesBase:
    """The kinds of a parsed `[sources]` table (other keys of the table are not ours)."""
    return cast(KindTablesBase, KindSources.model_validate(sources_table))
