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
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr

from bridge.core.models import Alert, Notification
from bridge.sinks import teams_card
from bridge.sinks.http_errors import post
from bridge.sinks.sink_plugin import Pace, SinkContext, SinkPlugin
from bridge.sinks.sink_settings import ChatWebhookSettings


class TeamsSinkSettings(ChatWebhookSettings):
    """`url`: the Workflows webhook URL (it carries its own `sig=`)."""

    type: Literal["teams"] = Field(description="Sink type.")
    messages_per_second: float = Field(default=4.0, gt=0, description="Pacing per Teams webhook, fleet-wide.")


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
