"""The smaller sections: `[severity]`, `[openclaw]`, `[delivery]`, `[http]`, `[runbooks]`, `[console]`."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bridge.config.console_auth import ConsoleAuthSettings
from bridge.config.secrets import AbsentUnlessSetSecret, OptionalSecret, secret_env, secret_file
from bridge.config.section import NAME_RE, Section, check_http_url
from bridge.core.models import Severity

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


class OpenClawSettings(Section):
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
        default=90.0,
        gt=0,
        description="Timeout of one gateway call, from when it is sent (time waiting for a slot is not counted); "
        "then a fallback summary. A CPU model's cold first call takes 25-35 s, and a call queued behind another.",
    )
    max_concurrency: int = Field(
        default=2,
        ge=1,
        le=256,
        description="Gateway calls in flight at most; the rest wait in the bridge, outside `timeout_s` "
        "(a local model serves one call at a time; a hosted one may take 4).",
    )
    calls_per_minute: int = Field(
        default=60, ge=0, description="Call budget per minute; over it: fallback summaries (`budget`)."
    )
    cache_ttl_s: int = Field(default=3600, ge=0, description="Summary cache lifetime per fingerprint.")
    summary_per_cause: bool = Field(
        default=True,
        description="A failure whose dependency is down (unreachable, unavailable, rate-limited) is summarized "
        "once per cause, from the cause alone, across queues and kinds; false: once per fingerprint.",
    )
    breaker_failures: int = Field(default=3, ge=1, description="Consecutive failures that open the circuit.")
    breaker_cooldown_s: float = Field(
        default=60.0, gt=0, description="Seconds the circuit stays open before a trial call."
    )
    response_format: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema",
        description="`response_format` sent: `json_schema` (the summary schema, runbook ids as an enum), "
        "`json_object`, or `none`. Best effort; replies are salvaged field by field anyway.",
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


class DeliverySettings(Section):
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
        default=24 * 3600, ge=60,
        description="How long the delivery ledger remembers a sent alert (every replay the bridge makes itself "
        "comes within minutes; one key per job and per-job sink, 142 B: docs/operations.md, \"Redis memory: "
        "planning\").",
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


class HttpSettings(Section):
    transport: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp", description="HTTP transport under the shared httpx client."
    )
    max_connections: int = Field(default=100, ge=1, description="Connection pool size.")


class RunbookSettings(Section):
    dir: Path | None = Field(default=None, description="Folder of failure runbooks (default: the packaged ones).")
    base_url: str | None = Field(
        default=None, description="Where runbooks are published; alert cards link `<base_url>/<id>.md`."
    )


class ConsoleSettings(Section):
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
    auth: ConsoleAuthSettings = Field(default_factory=ConsoleAuthSettings, description="Roles and sign-in.")
    refresh_s: float = Field(
        default=15.0, ge=0, le=3600,
        description="How often open console pages update themselves (seconds; 0: never). The reader can pause it.",
    )
