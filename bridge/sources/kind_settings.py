"""Configuration of the built-in DLQ kinds: one array of tables per kind under `[sources]`.

Contract: docs/design.md, section 2b. Each table becomes one source; its `name` (defaulted from
the kind and its store) names the source in metrics, `check`, receipts and the cursor keys, so
names are unique. Connection strings are never written in the file: `*_env` names the
environment variable that holds them (resolved when the sources are built, see
`bridge.sources.build`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

SOURCE_NAME_RE = r"^[A-Za-z0-9._:-]+$"
ENV_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"


class KindSettings(BaseModel):
    """One `[[sources.<kind>]]` table; each kind's model subclasses it (listed in bridge/sources/kind_registry.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(
        default=None,
        pattern=SOURCE_NAME_RE,
        description="Names the source in metrics, `check`, cursor and archive keys (default: kind and store); unique.",
    )

    def source_name(self) -> str:
        return self.name or self.default_name()

    def default_name(self) -> str:
        raise NotImplementedError


class WatchedSettings(KindSettings):
    """Owner-held stores: read from their Redis, cursor kept in the bridge's Redis."""

    redis_url_env: str | None = Field(
        default=None,
        pattern=ENV_NAME_RE,
        description="Environment variable holding the URL of the job system's Redis (unset: the bridge's Redis).",
    )
    lease_s: float = Field(
        default=60.0, gt=0, description="A job held by a replica that stopped comes back to the fleet after this."
    )
    leave_check_s: float = Field(
        default=5.0,
        gt=0,
        description="How often the jobs alerted to a pagerduty sink with `resolve_on_retry` are checked for having "
        "left the store (retried or deleted by hand: their incident is resolved; trimmed: not).",
    )


class SidekiqSourceSettings(WatchedSettings):
    """`[[sources.sidekiq]]`: the `dead` sorted set (Sidekiq Web retries)."""

    namespace: str = Field(
        default="", pattern=r"^[A-Za-z0-9._:-]*$", description="redis-namespace key prefix, if the app uses one."
    )
    dead_max_jobs: int = Field(
        default=10_000,
        ge=1,
        description="Sidekiq's `dead_max_jobs` as the app sets it: a job leaving a full dead set may be a trim, "
        "so it resolves nothing unless an older job is still there.",
    )
    dead_timeout_s: float = Field(
        default=180 * 24 * 3600.0,
        gt=0,
        description="Sidekiq's `dead_timeout_in_seconds` as the app sets it: a job older than this that leaves "
        "may be a trim, so it resolves nothing unless an older job is still there.",
    )

    def default_name(self) -> str:
        return f"sidekiq.{self.namespace}" if self.namespace else "sidekiq"


class BullMQSourceSettings(WatchedSettings):
    """`[[sources.bullmq]]`: `<prefix>:<queue>:failed` + job hashes (Bull Board retries)."""

    prefix: str = Field(default="bull", min_length=1, description="BullMQ key prefix.")
    queues: list[str] = Field(
        default_factory=list, description="Queues to watch; empty: every queue SCAN finds (`<prefix>:*:meta`)."
    )

    def default_name(self) -> str:
        return f"bullmq.{self.prefix}".replace("{", "").replace("}", "")


class RQSourceSettings(WatchedSettings):
    """`[[sources.rq]]`: `rq:failed:<queue>` + `rq:job:<id>` (+ `rq:results:<id>`); never unpickled."""

    queues: list[str] = Field(default_factory=list, description="Queues to watch; empty: every queue in `rq:queues`.")

    def default_name(self) -> str:
        return "rq"


class DramatiqSourceSettings(WatchedSettings):
    """`[[sources.dramatiq]]`: `<namespace>:<queue>.XQ` + `.XQ.msgs` on Dramatiq's Redis broker."""

    namespace: str = Field(
        default="dramatiq", min_length=1, pattern=r"^[A-Za-z0-9._:-]+$", description="The RedisBroker's `namespace`."
    )
    queues: list[str] = Field(
        default_factory=list, description="Queues to watch; empty: every queue SCAN finds (`<namespace>:*.XQ`)."
    )
    dead_message_ttl_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="The RedisBroker's `dead_message_ttl` (in seconds) as the app sets it: a message that leaves "
        "the dead-letter queue this old may be Dramatiq's own cleanup, so it resolves nothing.",
    )

    def default_name(self) -> str:
        return "dramatiq" if self.namespace == "dramatiq" else f"dramatiq.{self.namespace}"


class RedisStreamSourceSettings(KindSettings):
    """`[[sources.redis_stream]]`: a consumer group; XACK after finish, XAUTOCLAIM for dead consumers."""

    redis_url_env: str | None = Field(
        default=None,
        pattern=ENV_NAME_RE,
        description="Environment variable holding the URL of the Redis with the stream (unset: the bridge's Redis).",
    )
    stream: str = Field(default="dead_letters", min_length=1, description="The dead-letter stream.")
    group: str = Field(default="dlq-bridge", min_length=1, description="Consumer group (created if missing).")
    min_idle_s: float = Field(
        default=60.0, gt=0, description="A stopped consumer's pending entry idle this long is taken over (XAUTOCLAIM)."
    )

    def default_name(self) -> str:
        return f"stream.{self.stream}".replace("{", "").replace("}", "")


class RabbitMQSourceSettings(KindSettings):
    """`[[sources.rabbitmq]]`: a queue bound to a dead-letter exchange; ack after finish."""

    url_env: str = Field(
        default="RABBITMQ_URL", pattern=ENV_NAME_RE, description="Environment variable holding the AMQP URL."
    )
    queue: str = Field(min_length=1, description="The queue bound to the dead-letter exchange.")
    prefetch: int = Field(default=10, ge=1, le=1000, description="Unacknowledged messages held at once.")

    def default_name(self) -> str:
        return f"rabbitmq.{self.queue}"


class SqsSourceSettings(KindSettings):
    """`[[sources.sqs]]`: delete after finish; ApproximateReceiveCount → attempts."""

    queue_url: str = Field(description="URL of the dead-letter queue.")
    endpoint_url: str | None = Field(
        default=None, description="Endpoint for local SQS (moto, LocalStack, ElasticMQ); unset: AWS."
    )
    region: str | None = Field(
        default=None, description="AWS region; unset: from the queue URL, else AWS_REGION / AWS_DEFAULT_REGION."
    )
    visibility_timeout_s: int = Field(
        default=60, ge=1, le=43_200, description="A received message not deleted comes back after this."
    )

    @field_validator("queue_url", "endpoint_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("must be an http(s) URL with a host")
        return value

    def default_name(self) -> str:
        return "sqs." + (urlsplit(self.queue_url).path.rstrip("/").rsplit("/", 1)[-1] or "queue")

    def region_from_url(self) -> str | None:
        """`https://sqs.eu-west-1.amazonaws.com/…` → `eu-west-1`."""
        host = urlsplit(self.queue_url).hostname or ""
        parts = host.split(".")
        if len(parts) >= 4 and parts[0] == "sqs" and parts[-2:] == ["amazonaws", "com"]:
            return parts[1]
        return None


def duplicate_source_name(kinds: list[KindSettings]) -> str | None:
    """The problem with two sources of one name, or None when every name is unique."""
    seen: set[str] = set()
    for kind in kinds:
        name = kind.source_name()
        if name in seen:
            return f"two sources are named {name!r}: give one of them its own `name`"
        seen.add(name)
    return None


_Kind = KindSettings  # the old private names, for code not yet moved to the public ones
_Watched = WatchedSettings
