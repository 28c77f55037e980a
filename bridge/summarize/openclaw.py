"""The OpenClaw gateway client: one chat completion per dead letter.

    POST {url}/v1/chat/completions
    Authorization: Bearer <token>        (omitted when no token is configured)
    x-openclaw-agent-id: <agent>

Every failure becomes a SummaryError whose `reason` is the fallback reason
(`timeout`, `http_<code>`, `invalid_json`, and `error` when the gateway cannot
be reached or the transport fails);
a 429 is a GatewayBusy carrying the Retry-After delay. Nothing the gateway
returns chooses a URL or a header: the URL and headers are fixed here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Any

import httpx
import orjson

from bridge.clients.http import parse_retry_after
from bridge.clients.net_errors import describe_transport_error
from bridge.core.errors import SummaryError
from bridge.core.metrics import Metrics
from bridge.core.models import Severity
from bridge.settings import OpenClawSettings

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
AGENT_HEADER = "x-openclaw-agent-id"


def summary_schema(runbook_ids: Collection[str]) -> dict[str, Any]:
    """The JSON schema of a summary; `runbook_hint` is one of the catalogue ids or empty."""
    text = {"type": "string", "minLength": 1}
    return {
        "type": "object",
        "properties": {
            "title": {**text, "maxLength": 120},
            "severity": {"type": "string", "enum": [s.value for s in Severity]},
            "likely_cause": {**text, "maxLength": 500},
            "next_steps": {"type": "array", "items": {**text, "maxLength": 200}, "minItems": 1, "maxItems": 4},
            "runbook_hint": {"type": "string", "enum": [*sorted(runbook_ids), ""]},
        },
        "required": ["title", "severity", "likely_cause", "next_steps", "runbook_hint"],
        "additionalProperties": False,
    }


def response_format(kind: str, runbook_ids: Collection[str]) -> dict[str, Any] | None:
    """The `response_format` body field for `[openclaw] response_format` (None: not sent)."""
    if kind == "json_schema":
        schema = {"name": "dlq_bridge_summary", "strict": True, "schema": summary_schema(runbook_ids)}
        return {"type": "json_schema", "json_schema": schema}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


class GatewayBusy(SummaryError):
    """429 from the gateway; `retry_after_s` is its Retry-After (None when absent)."""

    def __init__(self, retry_after_s: float | None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__("http_429", "gateway returned 429")


def gateway_headers(settings: OpenClawSettings) -> dict[str, str]:
    """The agent header, and the bearer token when one is configured."""
    headers = {AGENT_HEADER: settings.agent, "Accept": "application/json"}
    if settings.token is not None:
        headers["Authorization"] = f"Bearer {settings.token.get_secret_value()}"
    return headers


class GatewayClient:
    """Sends chat completions with a timeout (the caller bounds concurrency)."""

    def __init__(
        self,
        settings: OpenClawSettings,
        http: httpx.AsyncClient,
        metrics: Metrics,
        runbook_ids: Collection[str] = (),
    ) -> None:
        self._settings = settings
        self._response_format = response_format(settings.response_format, runbook_ids)
        self._http = http
        self._metrics = metrics
        self.url = settings.url + CHAT_PATH
        self._headers = {**gateway_headers(settings), "Content-Type": "application/json"}

    def headers(self) -> dict[str, str]:
        return gateway_headers(self._settings)

    def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The request body; `response_format`'s runbook enum is the whole catalogue, for every dead letter
        (leaving out the ids an entry contradicts made the 1.5B model answer `unknown` instead:
        docs/benchmarks.md, "tried and reverted"; salvage repairs a contradicted pick)."""
        body: dict[str, Any] = {
            "model": self._settings.model,
            "messages": messages,
            "temperature": 0,
            "stream": False,
        }
        if self._response_format is not None:
            body["response_format"] = self._response_format
        return body

    async def complete(self, messages: list[dict[str, str]]) -> Any:
        """The decoded JSON response of one call; raises SummaryError on any failure."""
        started = time.monotonic()
        outcome = "error"
        try:
            response = await self._post(messages)
            outcome = "ok"
            return response
        except SummaryError as exc:
            outcome = exc.reason
            raise
        finally:
            self._metrics.child(self._metrics.gateway_seconds, outcome).observe(time.monotonic() - started)

    async def _post(self, messages: list[dict[str, str]]) -> Any:
        timeout = self._settings.timeout_s
        try:
            async with asyncio.timeout(timeout):
                content = orjson.dumps(self.body(messages))
                response = await self._http.post(self.url, content=content, headers=self._headers, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # httpx-aiohttp reports a refused connection as ConnectTimeout: the label reads the cause
            raise SummaryError("error", f"gateway unreachable: {describe_transport_error(exc)}") from None
        except (TimeoutError, httpx.TimeoutException):
            raise SummaryError("timeout", f"gateway did not answer within {timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise SummaryError("error", f"gateway call failed: {describe_transport_error(exc)}") from None
        if response.status_code == 429:
            raise GatewayBusy(parse_retry_after(response.headers.get("Retry-After")))
        if not response.is_success:
            raise SummaryError(f"http_{response.status_code}", "gateway refused the request")
        try:
            return orjson.loads(response.content)  # orjson: the request and reply JSON at a tenth of the CPU
        except ValueError:
            raise SummaryError("invalid_json", "gateway response is not JSON") from None
