"""Microsoft Teams sink: an Adaptive Card posted to a Teams Workflows webhook (docs/sinks.md, Teams).

Teams retired Office 365 connectors; a channel now takes cards through a Workflows ("Post to a
channel when a webhook request is received") URL. The card is `bridge.sinks.teams_card`'s. Teams
takes about 4 requests a second per webhook, so the sink is paced fleet-wide like Slack
(`messages_per_second`); 202/200 is success, 400/401/403/404 permanent, 429 (with Retry-After,
which holds the webhook for every replica) and 5xx retried (`http_errors`). The URL carries its
own signature (`sig=`): it is a secret, never logged, never in an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, model_validator

from bridge.config.base import check_http_url
from bridge.models import Alert, Notification
from bridge.secret_fields import RequiredSecret, secret_env, secret_file
from bridge.sinks import teams_card
from bridge.sinks.config import GroupBy, SinkSettingsBase
from bridge.sinks.http_errors import post
from bridge.sinks.plugin import Pace, SinkContext, SinkPlugin


class TeamsSinkSettings(SinkSettingsBase):
    type: Literal["teams"] = Field(description="Sink type.")
    url: RequiredSecret = Field(
        default=None, description="Workflows webhook URL, a secret: prefer `url_env` or `url_file`."
    )
    url_env: str | None = secret_env("the Workflows webhook URL")
    url_file: Path | None = secret_file("the Workflows webhook URL")
    messages_per_second: float = Field(default=4.0, gt=0, description="Pacing per Teams webhook, fleet-wide.")
    group_by: GroupBy = Field(
        default="fingerprint", description="How alerts are grouped: `fingerprint`, `queue` or `none`"
    )

    @model_validator(mode="after")
    def _url_shape(self) -> TeamsSinkSettings:
        if self.url is not None:
            check_http_url(self.url.get_secret_value(), f"sink {self.name}: webhook url")
        return self

    def webhook_url(self) -> str:
        assert self.url is not None
        return self.url.get_secret_value()


class TeamsSink:
    """Posts one card per attempt to one Workflows webhook (pacing: bridge.delivery)."""

    type = "teams"

    def __init__(self, name: str, url: SecretStr, http: httpx.AsyncClient, timeout_s: float = 10.0) -> None:
        self.name = name
        self._url = url
        self._http = http
        self._timeout_s = timeout_s

    async def _post(self, key: str, message: dict[str, Any]) -> None:
        url = self._url.get_secret_value()
        await post(
            self._http, self.name, key, url,
            content=json.dumps(message, ensure_ascii=False).encode(), headers={"Content-Type": "application/json"},
            timeout_s=self._timeout_s, secrets=[url],
        )

    def render(self, alert: Alert) -> dict[str, Any]:
        return teams_card.render_card(alert)

    async def send(self, alert: Alert) -> None:
        await self._post(alert.idempotency_key, self.render(alert))

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return teams_card.render_group_card(notification)

    async def send_group(self, notification: Notification) -> None:
        await self._post(notification.ledger_key, self.render_group(notification))


def _build(settings: TeamsSinkSettings, ctx: SinkContext) -> TeamsSink:
    assert settings.url is not None
    return TeamsSink(settings.name, settings.url, ctx.http, ctx.timeout_s)


PLUGIN = SinkPlugin(
    settings=TeamsSinkSettings,
    build=_build,
    pace=lambda s: Pace(s.webhook_url(), s.messages_per_second),
    probe_url=TeamsSinkSettings.webhook_url,
)
