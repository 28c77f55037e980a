"""Configuration: a TOML file plus `DLQ_BRIDGE_…` environment overrides.

Built once by the CLI (`load_settings`) and passed down; nothing reads it from
a global. Every field carries its `Field(description=…)`: the configuration
reference (`bridge.commands.config_reference`) is generated from them.

Secrets are `SecretStr` of one shape, `x` / `x_env` / `x_file`
(bridge/secret_fields.py). `load_settings` merges file and environment, reads
the secrets, then validates once: validators only check shapes, never do I/O,
never mutate a model. See docs/design.md, section 6.
"""

from __future__ import annotations

import fnmatch
import os
import re
import socket
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import SplitResult, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bridge.env_config import (
    CONFIG_ENV,
    ENV_PREFIX,
    UnknownVariable,
    deep_merge,
    env_overrides,
    unknown_variables,
)
from bridge.errors import ConfigError
from bridge.keys import CONSUMER_ID_RE
from bridge.models import Severity
from bridge.secret_fields import (
    AbsentUnlessSetSecret,
    OptionalSecret,
    RequiredSecret,
    RequiredSecretText,
    missing_secrets,
    resolve_secrets,
    secret_env,
    secret_file,
)
from bridge.sources.config import (
    BullMQSourceSettings,
    KindSources,
    RabbitMQSourceSettings,
    RedisStreamSourceSettings,
    RQSourceSettings,
    SidekiqSourceSettings,
    SqsSourceSettings,
    duplicate_source_name,
)

__all__ = ["CONFIG_ENV", "ENV_PREFIX", "Settings", "load_settings"]

NAME_RE = r"^[A-Za-z0-9._-]+$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _secrets_given(self) -> _Section:
        missing = missing_secrets(self)
        if missing:
            raise ValueError("; ".join(f"{self._owner()}{m}" for m in missing))
        return self

    def _owner(self) -> str:
        return ""


def check_http_url(value: str, what: str) -> str:
    """`value` when it is an http(s) URL with a host and a valid port; ValueError naming `what`."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL with a host")
    _check_port(parts, what)
    return value.rstrip("/") if what == "openclaw.url" else value


def _check_port(parts: SplitResult, what: str) -> None:
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{what} has a bad port (a number from 1 to 65535)")


class ServerSettings(_Section):
    host: str = Field(
        default="127.0.0.1",
        description="Listen address of `/healthz` and `/metrics` (the image sets 0.0.0.0).",
    )
    port: int = Field(default=8080, ge=0, le=65535, description="Listen port.")
    grace_s: float = Field(
        default=25.0,
        gt=0,
        description="On SIGTERM: seconds to finish in-flight entries before leaving them in the "
        "processing list (exits at once when nothing is in flight).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(default="info", description="Log level.")


class RedisSettings(_Section):
    url: OptionalSecret = Field(
        default=None,
        description="Redis URL (`redis://`, `rediss://`, `unix://`); unset with no `url_env`/`url_file`: "
        "embedded Redis.",
    )
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    consumer_id: str = Field(
        default_factory=lambda: default_consumer_id(),
        description="Stable id of this bridge: names its processing lists and heartbeat.",
    )
    data_dir: Path = Field(default=Path(".dlq-bridge"), description="Data folder of the embedded Redis.")
    embedded_port: int = Field(default=6390, ge=0, le=65535, description="Loopback port of the embedded Redis.")
    socket_timeout_s: float = Field(default=5.0, gt=0, description="Timeout of one Redis command.")
    cluster: bool = Field(
        default=False,
        description="`url` names any node of a Redis Cluster: the cluster client everywhere, DLQ discovery "
        "on every master (docs/design.md, section 2c).",
    )
    wait_replicas: int = Field(
        default=0,
        ge=0,
        le=16,
        description="After each hand-off and sink-queue forward, `WAIT` for this many replicas to have the "
        "write, so a master failover loses no alert (0: do not wait; adds latency per entry: docs/design.md, 2c).",
    )
    wait_timeout_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="How long one `WAIT` for `wait_replicas` may block before the bridge carries on (logged, "
        "counted in `dlq_bridge_replica_wait_total`).",
    )

    @field_validator("consumer_id")
    @classmethod
    def _consumer_id_shape(cls, value: str) -> str:
        if not CONSUMER_ID_RE.match(value):
            raise ValueError("consumer_id may only hold letters, digits, '.', '_' and '-'")
        return value

    @model_validator(mode="after")
    def _url_shape(self) -> RedisSettings:
        if self.url is None:
            if self.cluster:
                raise ValueError("redis.cluster needs redis.url, any node of the cluster")
            return self
        parts = urlsplit(self.url.get_secret_value())
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("redis.url must start with redis://, rediss:// or unix://")
        if parts.scheme != "unix":
            _check_port(parts, "redis.url")
        if self.cluster and (parts.scheme == "unix" or parts.path.strip("/") not in ("", "0")):
            raise ValueError("redis.cluster needs a redis:// or rediss:// url of one node, database 0")
        return self


def default_consumer_id() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "bridge"
    return host


class SourcesSettings(_Section):
    match: str = Field(default="dead_letter:*", description="SCAN pattern of the DLQ lists (never KEYS).")
    archive_max: int = Field(
        default=10_000, ge=1, description="Finished entries kept per DLQ in `dlq_bridge:alerted:<ref>`."
    )
    concurrency: int = Field(default=32, ge=1, le=1024, description="Entries processed at once.")
    rescan_interval_s: float = Field(
        default=2.0, gt=0, description="How often new DLQs are discovered by SCAN (raise it for huge keyspaces)."
    )
    poll_interval_s: float = Field(default=0.05, gt=0, description="Blocking wait per DLQ while all are empty.")
    heartbeat_interval_s: float = Field(
        default=10.0, gt=0, description="How often the consumer heartbeat is refreshed."
    )
    heartbeat_ttl_s: int = Field(
        default=30, ge=2, description="Heartbeat lifetime; after it, other consumers reap the processing list."
    )
    reap_interval_s: float = Field(
        default=15.0, gt=0, description="How often processing lists of dead consumers are returned."
    )
    excerpt_max_bytes: int = Field(default=2048, ge=64, description="Largest payload excerpt kept in an envelope.")
    max_parse_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Entries larger than this are not parsed: an excerpt and an *oversized dead letter* alert.",
    )
    max_sources: int = Field(
        default=1000,
        ge=1,
        description="DLQs served at once; more non-empty ones wait for their turn (shown in `/healthz` and "
        "`dlq_bridge_sources_waiting`), none is dropped.",
    )
    sticky_s: float = Field(
        default=600.0,
        ge=0,
        description="How long a drained DLQ stays tracked (and keeps its depth series) after it was last seen.",
    )
    quarantine_after: int = Field(
        default=3,
        ge=1,
        description="Deaths (or stalls) of its consumer while the entry ran alone; on the next claim it moves, "
        "unparsed, to `dlq_bridge:quarantine:<ref>` with a static alert. Deaths while it was one of several "
        "held make it a suspect only.",
    )
    entry_deadline_s: float = Field(
        default=30.0,
        gt=0,
        description="Deadline of one entry's intake (normalize, redact, fingerprint), measured on a thread; "
        "past it the entry is quarantined.",
    )

    sidekiq: list[SidekiqSourceSettings] = Field(
        default_factory=list, description="`[[sources.sidekiq]]`: Sidekiq dead sets, watched (see docs/sources.md)."
    )
    bullmq: list[BullMQSourceSettings] = Field(
        default_factory=list, description="`[[sources.bullmq]]`: BullMQ failed sets, watched (see docs/sources.md)."
    )
    rq: list[RQSourceSettings] = Field(
        default_factory=list, description="`[[sources.rq]]`: RQ failed registries, watched (see docs/sources.md)."
    )
    redis_stream: list[RedisStreamSourceSettings] = Field(
        default_factory=list,
        description="`[[sources.redis_stream]]`: dead-letter streams, consumed (see docs/sources.md).",
    )
    rabbitmq: list[RabbitMQSourceSettings] = Field(
        default_factory=list,
        description="`[[sources.rabbitmq]]`: queues bound to a dead-letter exchange, consumed (see docs/sources.md).",
    )
    sqs: list[SqsSourceSettings] = Field(
        default_factory=list, description="`[[sources.sqs]]`: SQS dead-letter queues, consumed (see docs/sources.md)."
    )

    def kinds(self) -> KindSources:
        """The configured kind sources (names checked unique)."""
        return KindSources(
            sidekiq=self.sidekiq,
            bullmq=self.bullmq,
            rq=self.rq,
            redis_stream=self.redis_stream,
            rabbitmq=self.rabbitmq,
            sqs=self.sqs,
        )

    @model_validator(mode="after")
    def _unique_kind_names(self) -> SourcesSettings:
        problem = duplicate_source_name(
            [*self.sidekiq, *self.bullmq, *self.rq, *self.redis_stream, *self.rabbitmq, *self.sqs]
        )
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _heartbeat_outlives_interval(self) -> SourcesSettings:
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ValueError("sources.heartbeat_ttl_s must be longer than heartbeat_interval_s")
        return self


SeverityMode = Literal["ignore", "raise_only", "trust"]


class SeveritySettings(BaseModel):
    """`[severity]`: routed severity by queue glob, and what the model's assessment may do.

    Keys other than `default` and `model` are queue globs, first match wins
    (docs/design.md, section 5b).
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Severity] = Field(init=False)

    default: Severity = Field(
        default=Severity.ERROR,
        description="Routed severity of queues no glob matches; further keys are queue globs "
        "(`\"payments*\" = \"critical\"`), first match wins.",
    )
    model: SeverityMode = Field(
        default="ignore",
        description="What the model's severity may do: `ignore` (shown as an assessment only), `raise_only` "
        "(may raise the routed severity), `trust` (replaces it). Risk: the model reads producer-written text, "
        "so `raise_only` lets a dead letter page on-call and `trust` also lets it keep a real failure off the "
        "pager.",
    )

    def for_queue(self, queue: str) -> Severity:
        """The configured severity of `queue`: first matching glob, else `default`."""
        for pattern, severity in (self.__pydantic_extra__ or {}).items():
            if fnmatch.fnmatchcase(queue, pattern):
                return severity
        return self.default

    def route(self, queue: str, assessment: Severity) -> Severity:
        """The severity alerts are routed by: configuration, ± the model's assessment per `model`."""
        configured = self.for_queue(queue)
        if self.model == "trust":
            return assessment
        if self.model == "raise_only" and assessment.rank > configured.rank:
            return assessment
        return configured


class OpenClawSettings(_Section):
    url: str = Field(description="Gateway base URL; without an `[openclaw]` section: fallback summaries only.")
    agent: str = Field(default="dlq-summarizer", pattern=NAME_RE, description="Agent id (`x-openclaw-agent-id`).")
    model: str | None = Field(
        default=None, description="Model name; default `openclaw/<agent>` (older gateways: `openclaw:<agent>`)."
    )
    token: OptionalSecret = Field(
        default=None, description="Gateway token inline (prefer `token_env` or `token_file`)."
    )
    token_env: str | None = secret_env("the token", "OPENCLAW_GATEWAY_TOKEN")
    token_file: Path | None = secret_file("the token")
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Timeout of one gateway call; then a fallback summary (a real gateway's first call takes 8-30 s).",
    )
    max_concurrency: int = Field(
        default=4, ge=1, le=256, description="Gateway calls in flight at most (the gateway serializes runs)."
    )
    calls_per_minute: int = Field(
        default=60, ge=0, description="Call budget per minute; over it: fallback summaries (`budget`)."
    )
    cache_ttl_s: int = Field(default=3600, ge=0, description="Summary cache lifetime per fingerprint.")
    breaker_failures: int = Field(default=3, ge=1, description="Consecutive failures that open the circuit.")
    breaker_cooldown_s: float = Field(
        default=60.0, gt=0, description="Seconds the circuit stays open before a trial call."
    )
    json_mode: bool = Field(
        default=True,
        description="Ask for `response_format` JSON (best effort; replies are validated anyway).",
    )
    max_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="A gateway 429 whose Retry-After is at most this many seconds is waited "
        "out (one call per cause); longer pauses fall back to static summaries.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_model(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("model") is None:
            agent = data.get("agent", cls.model_fields["agent"].default)
            return {**data, "model": f"openclaw/{agent}"}
        return data

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "openclaw.url")


class DeliverySettings(_Section):
    max_attempts: int = Field(
        default=8, ge=1, le=100, description="Attempts per sink before the delivery is recorded as undeliverable."
    )
    base_delay_s: float = Field(default=2.0, ge=0, description="Base of the full-jitter backoff.")
    max_delay_s: float = Field(default=60.0, ge=0, description="Cap of the backoff between attempts.")
    max_retry_after_s: float = Field(
        default=300.0, ge=0, description="Longest `Retry-After` honoured (longer values are cut to this)."
    )
    deadline_s: float = Field(default=900.0, gt=0, description="Give up on a delivery after this long.")
    request_timeout_s: float = Field(default=10.0, gt=0, description="Timeout of one HTTP request to a sink.")
    ledger_ttl_s: int = Field(
        default=7 * 24 * 3600, ge=60, description="How long the delivery ledger remembers a sent alert."
    )
    reservation_ttl_s: float = Field(
        default=30.0,
        ge=1,
        description="Seconds a delivery reservation outlives a sender killed mid-send "
        "(refreshed while the sender lives); the job is then sent by another replica.",
    )
    sink_concurrency: int = Field(
        default=32, ge=1, le=1000,
        description="Deliveries in flight per unpaced sink (webhook, console) and replica.",
    )
    paced_sink_concurrency: int = Field(
        default=4, ge=1, le=100,
        description="Deliveries in flight per paced sink (slack, pagerduty) and replica.",
    )
    lease_s: float = Field(
        default=15.0, ge=1,
        description="Lease on a taken sink-queue item and on a claimed alert group (renewed while in "
        "flight); a killed replica's items and groups come back after it.",
    )
    queue_stale_s: float = Field(
        default=300.0, gt=0,
        description="A sink queue whose oldest alert is older shows `degraded` on /healthz.",
    )
    undeliverable_max: int = Field(
        default=10_000, ge=1,
        description="Records kept in `dlq_bridge:undeliverable`; the oldest are trimmed beyond it (logged, "
        "`dlq_bridge_undeliverable_trimmed_total`). Entries stay archived either way.",
    )


class HttpSettings(_Section):
    transport: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp", description="HTTP transport under the shared httpx client."
    )
    max_connections: int = Field(default=100, ge=1, description="Connection pool size.")


class RunbookSettings(_Section):
    dir: Path | None = Field(default=None, description="Folder of failure runbooks (default: the packaged ones).")
    base_url: str | None = Field(
        default=None, description="Where runbooks are published; alert cards link `<base_url>/<id>.md`."
    )


class ConsoleSettings(_Section):
    """The DLQ console and its JSON API (docs/design.md, section "Console and JSON API")."""

    enabled: bool = Field(
        default=False, description="Serve `/console/` and `/api/v1/` where `/healthz` is served."
    )
    token: AbsentUnlessSetSecret = Field(
        default=None, description="Token for console actions inline (prefer `token_env` or `token_file`)."
    )
    token_env: str | None = secret_env(
        "the token console actions need (without one the console is read-only)", "DLQ_BRIDGE_CONSOLE_TOKEN"
    )
    token_file: Path | None = secret_file("the console token")


GroupBy = Literal["fingerprint", "queue", "none"]


class _SinkBase(_Section):
    name: str = Field(pattern=NAME_RE, description="Unique sink name (metrics labels, ledger keys).")
    min_severity: Severity = Field(default=Severity.INFO, description="Lowest severity this sink receives.")
    queues: list[str] = Field(default_factory=list, description="Queue globs this sink receives (empty: all).")
    group_by: GroupBy = Field(
        default="none",
        description=(
            "How alerts are grouped into one notification: `fingerprint` (one per cause), "
            "`queue`, or `none` (one notification per job)"
        ),
    )
    group_wait_s: float = Field(
        default=10.0, ge=0, description="Wait after a group's first job before its first notification"
    )
    group_interval_s: float = Field(
        default=60.0, gt=0, description="Least time between two notifications of a growing group"
    )
    repeat_interval_s: float = Field(
        default=14400.0,
        gt=0,
        description="A group with no new jobs this long after its last notification is re-sent once, then closed",
    )

    def _owner(self) -> str:
        return f"sink {self.name}: "

    def routes(self, queue: str, severity: Severity) -> bool:
        """True when this sink wants alerts of `severity` from `queue`."""
        if not severity.at_least(self.min_severity):
            return False
        return not self.queues or any(fnmatch.fnmatchcase(queue, p) for p in self.queues)


class ConsoleSinkSettings(_SinkBase):
    type: Literal["console"] = Field(description="Sink type.")
    color: bool | None = Field(default=None, description="Colours on the console (default: when stdout is a terminal).")


class SlackSinkSettings(_SinkBase):
    type: Literal["slack"] = Field(description="Sink type.")
    url: RequiredSecret = Field(
        default=None, description="Incoming-webhook URL, a secret: prefer `url_env` or `url_file`."
    )
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    messages_per_second: float = Field(default=1.0, gt=0, description="Pacing per Slack webhook.")
    group_by: GroupBy = Field(
        default="fingerprint", description="How alerts are grouped: `fingerprint`, `queue` or `none`"
    )

    @model_validator(mode="after")
    def _url_shape(self) -> SlackSinkSettings:
        if self.url is not None:
            check_http_url(self.url.get_secret_value(), f"sink {self.name}: webhook url")
        return self


class PagerDutySinkSettings(_SinkBase):
    type: Literal["pagerduty"] = Field(description="Sink type.")
    routing_key: RequiredSecret = Field(
        default=None,
        description="PagerDuty routing key inline (prefer `routing_key_env` or `routing_key_file`).",
    )
    routing_key_env: str | None = secret_env("the routing key")
    routing_key_file: Path | None = secret_file("the routing key")
    events_url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", description="PagerDuty Events API v2 URL."
    )
    events_per_minute: float = Field(default=120.0, gt=0, description="Pacing per routing key.")
    source: str | None = Field(default=None, description="PagerDuty `payload.source` (default: the consumer id).")
    group_by: GroupBy = Field(
        default="fingerprint", description="How alerts are grouped: `fingerprint`, `queue` or `none`"
    )
    resolve_on_retry: bool = Field(
        default=True,
        description=(
            "Send `event_action: resolve` with the trigger's dedup_key when an alerted job is retried or "
            "deleted by hand: it left a Sidekiq dead set, BullMQ failed set or RQ failed registry without "
            "being trimmed (docs/sources.md), or the console redrove it. On a grouped sink only a group of "
            "that one job is resolved"
        ),
    )

    @field_validator("events_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "events_url")


class WebhookSinkSettings(_SinkBase):
    type: Literal["webhook"] = Field(description="Sink type.")
    url: RequiredSecretText = Field(default=None, description="Endpoint URL.")
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")
    secret: RequiredSecret = Field(
        default=None, description="Signing secret(s) inline, space or comma separated for rotation."
    )
    secret_env: str | None = secret_env("the signing secret(s)")
    secret_file: Path | None = secret_file("the signing secret(s)")

    @model_validator(mode="after")
    def _url_shape(self) -> WebhookSinkSettings:
        if self.url is not None:
            check_http_url(self.url, f"sink {self.name}: url")
        return self

    def signing_secrets(self) -> list[str]:
        """Several secrets (space or comma separated) sign in parallel, for rotation."""
        assert self.secret is not None
        return [s for s in re.split(r"[\s,]+", self.secret.get_secret_value()) if s]


SinkSettings = Annotated[
    ConsoleSinkSettings | SlackSinkSettings | PagerDutySinkSettings | WebhookSinkSettings,
    Field(discriminator="type"),
]


class Settings(BaseSettings):
    """The whole configuration (docs/design.md, section 6).

    Built by `load_settings`; constructing it directly (tests, benches) reads
    no environment and no secret files.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    severity: SeveritySettings = Field(default_factory=SeveritySettings)
    openclaw: OpenClawSettings | None = None
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    runbooks: RunbookSettings = Field(default_factory=RunbookSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    sinks: list[SinkSettings] = Field(default_factory=list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what is passed in: load_settings merges the environment itself.
        return (init_settings,)

    @model_validator(mode="after")
    def _unique_sink_names(self) -> Settings:
        names = [s.name for s in self.sinks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"sink names must be unique: {', '.join(dupes)}")
        return self

    def severity_for(self, queue: str) -> Severity:
        """Configured severity of `queue`: first matching glob, else `default`."""
        return self.severity.for_queue(queue)

    def effective_sinks(self) -> list[SinkSettings]:
        """The configured sinks, or the console sink when none is configured."""
        if self.sinks:
            return list(self.sinks)
        return [ConsoleSinkSettings(name="console", type="console")]

    def referenced_variables(self) -> set[str]:
        """Environment variable names the configuration points at (every `*_env` value)."""
        return {value for key, value in _fields(self) if key.endswith("_env") and isinstance(value, str)}


def _fields(model: BaseModel) -> Iterator[tuple[str, Any]]:
    for key in type(model).model_fields:
        value = getattr(model, key)
        yield key, value
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                yield from _fields(item)


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from `path` (or $DLQ_BRIDGE_CONFIG) and the environment.

    Raises ConfigError with one line per problem; never a traceback.
    """
    env = os.environ if environ is None else environ
    if path is None and env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV])
    data = _read_toml(path) if path is not None else {}
    data = deep_merge(data, env_overrides(Settings, env))
    data, problems = resolve_secrets(Settings, data, env)
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        problems += format_validation_error(exc)
    if problems:
        raise ConfigError(problems)
    return settings


def unknown_env_variables(settings: Settings, environ: Mapping[str, str] | None = None) -> list[UnknownVariable]:
    """Every `DLQ_BRIDGE_…` variable of `environ` that maps to no setting (a typo is not silent)."""
    env = os.environ if environ is None else environ
    return unknown_variables(Settings, env, settings.referenced_variables())


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError([f"config file {path} does not exist"]) from None
    except IsADirectoryError:
        raise ConfigError([f"config file {path} is a directory"]) from None
    except OSError as exc:
        raise ConfigError([f"config file {path} cannot be read ({exc.strerror})"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"config file {path} is not UTF-8 text (byte {exc.start})"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"config file {path} is not valid TOML: {exc}"]) from None


_SINK_TAGS = {"console", "slack", "pagerduty", "webhook"}


def format_validation_error(exc: ValidationError) -> list[str]:
    """One readable line per problem, without echoing input values."""
    problems = []
    for err in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in err["loc"] if p not in _SINK_TAGS)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        problems.append(f"{where}: {msg}" if where else msg)
    return problems
