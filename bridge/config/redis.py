"""`[server]` and `[redis]`: where the bridge listens and the Redis it keeps its state in."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from bridge.config.secrets import OptionalSecret, secret_env, secret_file
from bridge.config.section import Section, check_port
from bridge.core.names import CONSUMER_ID_RE


class ServerSettings(Section):
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


class RedisSettings(Section):
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
    allow_eviction: bool = Field(
        default=False,
        description="Run on a Redis whose maxmemory-policy can evict keys (allkeys-*, volatile-*); a warning "
        "instead of a refusal. Risk: evicted processing lists, sink queues or ledger keys mean lost or repeated "
        "alerts, without a trace (docs/design.md, section 6c).",
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
            check_port(parts, "redis.url")
        if self.cluster and (parts.scheme == "unix" or parts.path.strip("/") not in ("", "0")):
            raise ValueError("redis.cluster needs a redis:// or rediss:// url of one node, database 0")
        return self


def default_consumer_id() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "bridge"
    return host
