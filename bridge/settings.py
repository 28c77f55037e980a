"""Configuration: a TOML file plus `DLQ_BRIDGE_…` environment overrides.

Built once by the CLI (`load_settings`) and passed down; nothing reads it from
a global. Secrets are `SecretStr`, taken inline, from an environment variable
(`*_env`, also honouring `<NAME>_FILE`) or from a file (`*_file`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bridge.errors import ConfigError
from bridge.keys import CONSUMER_ID_RE
from bridge.models import Severity

ENV_PREFIX = "DLQ_BRIDGE_"
CONFIG_ENV = "DLQ_BRIDGE_CONFIG"
NAME_RE = r"^[A-Za-z0-9._-]+$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def read_secret(
    owner: str, field: str, inline: SecretStr | None, env: str | None, file: Path | None
) -> SecretStr | None:
    """Resolve one secret: inline value, else env var (or `<env>_FILE`), else file."""
    if inline is not None and inline.get_secret_value():
        return inline
    if env:
        value = os.environ.get(env)
        if value:
            return SecretStr(value.strip())
        file_hint = os.environ.get(f"{env}_FILE")
        if file_hint:
            return _read_secret_file(owner, f"{field}_env", Path(file_hint))
        raise ValueError(f"{owner}{field}_env: environment variable {env} (or {env}_FILE) is not set")
    if file is not None:
        return _read_secret_file(owner, f"{field}_file", file)
    return None


def _read_secret_file(owner: str, field: str, path: Path) -> SecretStr:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{owner}{field} {path} cannot be read ({exc.strerror})") from None
    if not value:
        raise ValueError(f"{owner}{field} {path} is empty")
    return SecretStr(value)


def check_http_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL with a host")
    return value.rstrip("/") if what == "openclaw.url" else value


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    grace_s: float = Field(default=25.0, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"


class RedisSettings(_Section):
    url: SecretStr | None = None
    url_env: str | None = None
    url_file: Path | None = None
    consumer_id: str = Field(default_factory=lambda: default_consumer_id())
    data_dir: Path = Path(".dlq-bridge")
    embedded_port: int = Field(default=6390, ge=0, le=65535)
    socket_timeout_s: float = Field(default=5.0, gt=0)

    @field_validator("consumer_id")
    @classmethod
    def _consumer_id_shape(cls, value: str) -> str:
        if not CONSUMER_ID_RE.match(value):
            raise ValueError("consumer_id may only hold letters, digits, '.', '_' and '-'")
        return value

    @model_validator(mode="after")
    def _resolve(self) -> RedisSettings:
        url = read_secret("", "url", self.url, self.url_env, self.url_file)
        if url is not None and urlsplit(url.get_secret_value()).scheme not in (
            "redis",
            "rediss",
            "unix",
        ):
            raise ValueError("redis.url must start with redis://, rediss:// or unix://")
        object.__setattr__(self, "url", url)
        return self


def default_consumer_id() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "bridge"
    return host


class SourcesSettings(_Section):
    match: str = "dead_letter:*"
    archive_max: int = Field(default=10_000, ge=1)
    concurrency: int = Field(default=32, ge=1, le=1024)
    rescan_interval_s: float = Field(default=2.0, gt=0)
    poll_interval_s: float = Field(default=0.05, gt=0)
    heartbeat_interval_s: float = Field(default=10.0, gt=0)
    heartbeat_ttl_s: int = Field(default=30, ge=2)
    reap_interval_s: float = Field(default=15.0, gt=0)
    excerpt_max_bytes: int = Field(default=2048, ge=64)

    @model_validator(mode="after")
    def _heartbeat_outlives_interval(self) -> SourcesSettings:
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ValueError("sources.heartbeat_ttl_s must be longer than heartbeat_interval_s")
        return self


class OpenClawSettings(_Section):
    url: str
    agent: str = Field(default="dlq-summarizer", pattern=NAME_RE)
    model: str | None = None
    token: SecretStr | None = None
    token_env: str | None = "OPENCLAW_GATEWAY_TOKEN"  # noqa: S105 - the variable name, not a secret
    token_file: Path | None = None
    timeout_s: float = Field(default=20.0, gt=0)
    max_concurrency: int = Field(default=8, ge=1, le=256)
    calls_per_minute: int = Field(default=60, ge=0)
    cache_ttl_s: int = Field(default=3600, ge=0)
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=30.0, gt=0)
    json_mode: bool = True

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "openclaw.url")

    @model_validator(mode="after")
    def _resolve(self) -> OpenClawSettings:
        token = read_secret("", "token", self.token, self.token_env, self.token_file)
        object.__setattr__(self, "token", token)
        if self.model is None:
            object.__setattr__(self, "model", f"openclaw/{self.agent}")
        return self


class DeliverySettings(_Section):
    max_attempts: int = Field(default=8, ge=1, le=100)
    base_delay_s: float = Field(default=2.0, ge=0)
    max_delay_s: float = Field(default=60.0, ge=0)
    max_retry_after_s: float = Field(default=300.0, ge=0)
    deadline_s: float = Field(default=900.0, gt=0)
    request_timeout_s: float = Field(default=10.0, gt=0)
    ledger_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    # Sink queues (docs/design.md, section 5b): deliveries in flight per sink and replica,
    # for unpaced sinks (webhook, console) and for paced ones (slack, pagerduty).
    sink_concurrency: int = Field(default=32, ge=1, le=1000)
    paced_sink_concurrency: int = Field(default=4, ge=1, le=100)
    lease_s: float = Field(default=15.0, ge=1)
    queue_stale_s: float = Field(default=300.0, gt=0)


class HttpSettings(_Section):
    transport: Literal["aiohttp", "httpx"] = "aiohttp"
    max_connections: int = Field(default=100, ge=1)


class RunbookSettings(_Section):
    dir: Path | None = None
    base_url: str | None = None


class _SinkBase(_Section):
    name: str = Field(pattern=NAME_RE)
    min_severity: Severity = Severity.INFO
    queues: list[str] = Field(default_factory=list)

    def routes(self, queue: str, severity: Severity) -> bool:
        """True when this sink wants alerts of `severity` from `queue`."""
        if not severity.at_least(self.min_severity):
            return False
        return not self.queues or any(fnmatch.fnmatchcase(queue, p) for p in self.queues)


class ConsoleSinkSettings(_SinkBase):
    type: Literal["console"]
    color: bool | None = None


class SlackSinkSettings(_SinkBase):
    type: Literal["slack"]
    url: SecretStr | None = None
    url_env: str | None = None
    url_file: Path | None = None
    messages_per_second: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _resolve(self) -> SlackSinkSettings:
        url = read_secret(f"sink {self.name}: ", "url", self.url, self.url_env, self.url_file)
        if url is None:
            raise ValueError(f"sink {self.name}: set one of url, url_env or url_file")
        check_http_url(url.get_secret_value(), f"sink {self.name}: webhook url")
        object.__setattr__(self, "url", url)
        return self


class PagerDutySinkSettings(_SinkBase):
    type: Literal["pagerduty"]
    routing_key: SecretStr | None = None
    routing_key_env: str | None = None
    routing_key_file: Path | None = None
    events_url: str = "https://events.pagerduty.com/v2/enqueue"
    events_per_minute: float = Field(default=120.0, gt=0)
    source: str | None = None

    @field_validator("events_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "events_url")

    @model_validator(mode="after")
    def _resolve(self) -> PagerDutySinkSettings:
        key = read_secret(
            f"sink {self.name}: ",
            "routing_key",
            self.routing_key,
            self.routing_key_env,
            self.routing_key_file,
        )
        if key is None:
            raise ValueError(
                f"sink {self.name}: set one of routing_key, routing_key_env or routing_key_file"
            )
        object.__setattr__(self, "routing_key", key)
        return self


class WebhookSinkSettings(_SinkBase):
    type: Literal["webhook"]
    url: str | None = None
    url_env: str | None = None
    url_file: Path | None = None
    secret: SecretStr | None = None
    secret_env: str | None = None
    secret_file: Path | None = None

    @model_validator(mode="after")
    def _resolve(self) -> WebhookSinkSettings:
        owner = f"sink {self.name}: "
        raw_url = SecretStr(self.url) if self.url else None
        url = read_secret(owner, "url", raw_url, self.url_env, self.url_file)
        if url is None:
            raise ValueError(f"{owner}set one of url, url_env or url_file")
        object.__setattr__(self, "url", check_http_url(url.get_secret_value(), f"{owner}url"))
        secret = read_secret(owner, "secret", self.secret, self.secret_env, self.secret_file)
        if secret is None:
            raise ValueError(f"{owner}set one of secret, secret_env or secret_file")
        object.__setattr__(self, "secret", secret)
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
    """The whole configuration (DESIGN section 6)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    severity: dict[str, Severity] = Field(default_factory=lambda: {"default": Severity.ERROR})
    openclaw: OpenClawSettings | None = None
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    runbooks: RunbookSettings = Field(default_factory=RunbookSettings)
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
        # Environment overrides the file (passed in as init kwargs).
        return (env_settings, init_settings)

    @model_validator(mode="after")
    def _unique_sink_names(self) -> Settings:
        names = [s.name for s in self.sinks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"sink names must be unique: {', '.join(dupes)}")
        return self

    def severity_for(self, queue: str) -> Severity:
        """Fallback severity of `queue`: first matching glob, else `default`."""
        for pattern, severity in self.severity.items():
            if pattern != "default" and fnmatch.fnmatchcase(queue, pattern):
                return severity
        return self.severity.get("default", Severity.ERROR)

    def effective_sinks(self) -> list[SinkSettings]:
        """The configured sinks, or the console sink when none is configured."""
        if self.sinks:
            return list(self.sinks)
        return [ConsoleSinkSettings(name="console", type="console")]


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from `path` (or $DLQ_BRIDGE_CONFIG) and the environment.

    Raises ConfigError with one line per problem; never a traceback.
    """
    env = os.environ if environ is None else environ
    if path is None and env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV])
    data = _read_toml(path) if path is not None else {}
    try:
        return _build(data, env)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


def _build(data: dict[str, Any], env: Mapping[str, str]) -> Settings:
    if env is os.environ:
        return Settings(**data)
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return Settings(**data)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError([f"config file {path} does not exist"]) from None
    except OSError as exc:
        raise ConfigError([f"config file {path} cannot be read ({exc.strerror})"]) from None
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
