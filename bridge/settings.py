"""Configuration: a TOML file plus `DLQ_BRIDGE_…` environment overrides.

Built once by the CLI (`load_settings`) and passed down; nothing reads it from
a global. Every field carries its `Field(description=…)`: the configuration
reference (`bridge.commands.config_reference`) is generated from them.

The sections live beside what reads them: bridge/config/ (server, redis,
sources, the smaller sections), each sink type's table in its plug-in module
(bridge/sinks/<type>.py, listed in bridge/sinks/sink_registry.py), each source
kind's table in bridge/sources/kind_settings.py. This module assembles them.

Secrets are `SecretStr` of one shape, `x` / `x_env` / `x_file`
(bridge/config/secrets.py). `load_settings` merges file and environment, reads
the secrets, then validates once: validators only check shapes, never do I/O,
never mutate a model. See docs/design.md, section 6.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, PlainValidator, SerializeAsAny, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bridge.config.env import (
    CONFIG_ENV,
    ENV_PREFIX,
    UnknownVariable,
    deep_merge,
    env_overrides,
    unknown_variables,
)
from bridge.config.problems import format_validation_error
from bridge.config.redis import RedisSettings, ServerSettings, default_consumer_id
from bridge.config.secrets import OneOf, resolve_secrets
from bridge.config.section import NAME_RE, check_http_url
from bridge.config.sections import (
    ConsoleSettings,
    DeliverySettings,
    HttpSettings,
    OpenClawSettings,
    RunbookSettings,
    SeverityMode,
    SeveritySettings,
)
from bridge.config.sources import ListSourcesSettings
from bridge.config.tracing import TracingSettings
from bridge.core.errors import ConfigError
from bridge.core.models import Severity
from bridge.sinks.console import ConsoleSinkSettings
from bridge.sinks.pagerduty import PagerDutySinkSettings
from bridge.sinks.sink_registry import SINKS
from bridge.sinks.sink_settings import GroupBy, SinkSettingsBase
from bridge.sinks.slack import SlackSinkSettings
from bridge.sinks.webhook import WebhookSinkSettings
from bridge.sources.kind_registry import KINDS
from bridge.stores.footprint import Retention

__all__ = [
    "CONFIG_ENV", "ENV_PREFIX", "NAME_RE", "ConsoleSettings", "ConsoleSinkSettings", "DeliverySettings",
    "GroupBy", "HttpSettings", "OpenClawSettings", "PagerDutySinkSettings", "RedisSettings", "RunbookSettings",
    "ServerSettings", "Settings", "SeverityMode", "SeveritySettings", "SinkSettings", "SlackSinkSettings",
    "SourcesSettings", "WebhookSinkSettings", "check_http_url", "default_consumer_id", "load_settings",
]

if TYPE_CHECKING:
    SourcesSettings = ListSourcesSettings
else:
    SourcesSettings = KINDS.tables_model("SourcesSettings", ListSourcesSettings)
"""`[sources]`: the list keys (bridge/config/sources.py) and one `[[sources.<kind>]]` array per kind
of bridge/sources/kind_registry.py."""

SinkSettings = SinkSettingsBase
"""A validated `[[sinks]]` table: the model of its type's plug-in (bridge/sinks/sink_registry.py)."""

_SinkTable = Annotated[
    SerializeAsAny[SinkSettingsBase],
    PlainValidator(SINKS.validate),
    OneOf(lambda: [plugin.settings for plugin in SINKS]),
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
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    sinks: list[_SinkTable] = Field(default_factory=list)

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
        return [SINKS.default()]

    def retention(self) -> Retention:
        """What bounds the bridge's Redis keys under these settings (`bridge.stores.footprint`)."""
        sinks = self.effective_sinks()
        grouped = [s for s in sinks if s.group_by != "none"]
        return Retention(
            archive_max=self.sources.archive_max,
            ledger_ttl_s=self.delivery.ledger_ttl_s,
            ledger_sinks=sum(1 for s in sinks if s.group_by == "none" and SINKS.of(s).ledger),
            grouping_sinks=len(grouped),
            group_members_max=max((s.group_members_max for s in grouped), default=200),
            repeat_interval_s=max((s.repeat_interval_s for s in grouped), default=14_400.0),
            summary_ttl_s=self.openclaw.cache_ttl_s if self.openclaw is not None else 0.0,
            undeliverable_max=self.delivery.undeliverable_max,
        )

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


def load_settings(
    path: Path | None = None, environ: Mapping[str, str] | None = None, *, serves_console: bool = True
) -> Settings:
    """Build Settings from `path` (or $DLQ_BRIDGE_CONFIG) and the environment.

    The `[console]` secrets (its token, the session key, the OpenID client secret) are required only
    of a process that serves an enabled console (`serves_console`: `run`, and `check`, which vouches
    for `run`); any other command loads the settings without the ones it cannot read.
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
        problems += format_validation_error(exc, data, Settings)
    else:
        if not (serves_console and settings.console.enabled):
            problems = [p for p in problems if not p.startswith(CONSOLE_SECRETS)]
    if problems:
        raise ConfigError(problems)
    return settings


CONSOLE_SECRETS = "console."  # where the secret resolver names a [console] secret it could not read


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


