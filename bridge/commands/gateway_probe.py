"""`check`'s OpenClaw probe: prove the token, the endpoint and the agent (docs/design.md, section 4).

The gateway's root serves its Control UI with 200 and no auth, so reaching
it proves nothing. Instead:

1. `GET /v1/models` with the bridge's token and agent header. 401/403 means
   the token is wrong; 404 means the chat-completions endpoint is disabled
   (`gateway.http.endpoints.chatCompletions.enabled`); the answer must list
   `openclaw/<agent>`, else the agent does not exist on that gateway.
2. With `--probe`, one tiny chat completion to the agent (a model call).

Each outcome is a (status, detail) pair; the token never appears in a detail.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bridge.clients.net_errors import describe_transport_error
from bridge.settings import OpenClawSettings
from bridge.summarize.openclaw import CHAT_PATH, MODELS_PATH, gateway_headers

OK, FAIL = "ok", "FAIL"
PROBE_TEXT = 'dlq-bridge check probe: reply with the JSON object {"ok": true} and nothing else.'

_STATUS_REASONS = {
    401: "token rejected (HTTP 401): check openclaw.token / OPENCLAW_GATEWAY_TOKEN",
    403: "token lacks access (HTTP 403): use the gateway's operator token",
    404: ("endpoint disabled (HTTP 404): set gateway.http.endpoints.chatCompletions.enabled: "
          "true in the gateway config"),
}


def status_reason(response: httpx.Response, path: str) -> str:
    """Why an HTTP answer is a failure, with the gateway's own message when it gave one."""
    known = _STATUS_REASONS.get(response.status_code)
    message = _error_message(response)
    if known:
        return known
    return f"HTTP {response.status_code} from {path}" + (f": {message}" if message else "")


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:160] if message else ""


def listed_models(response: httpx.Response) -> list[str]:
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return []
    return [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []


async def probe_models(http: httpx.AsyncClient, oc: OpenClawSettings) -> tuple[str, str]:
    """Step 1: the token works, the endpoint is on and the agent is listed."""
    started = time.perf_counter()
    try:
        response = await http.get(oc.url + MODELS_PATH, headers=gateway_headers(oc))
    except (httpx.HTTPError, OSError) as exc:
        return FAIL, f"GET {MODELS_PATH}: {describe_transport_error(exc)} after {time.perf_counter() - started:.1f} s"
    if not response.is_success:
        return FAIL, status_reason(response, MODELS_PATH)
    wanted = f"openclaw/{oc.agent}"
    models = listed_models(response)
    if wanted not in models:
        found = ", ".join(models[:6]) or "nothing"
        return FAIL, f"agent {oc.agent!r} unknown: {MODELS_PATH} lists {found}; add agents.entries[{oc.agent!r}]"
    took = (time.perf_counter() - started) * 1000
    return OK, f"token ok, {wanted} listed ({MODELS_PATH} in {took:.0f} ms)"


async def probe_chat(http: httpx.AsyncClient, oc: OpenClawSettings, timeout_s: float) -> tuple[str, str]:
    """Step 2 (`--probe`): one tiny chat completion through the agent."""
    started = time.perf_counter()
    body: dict[str, Any] = {"model": oc.model, "temperature": 0, "max_completion_tokens": 32,
                            "messages": [{"role": "user", "content": PROBE_TEXT}]}
    try:
        response = await http.post(oc.url + CHAT_PATH, json=body, headers=gateway_headers(oc),
                                   timeout=timeout_s)
    except (httpx.HTTPError, OSError) as exc:
        return FAIL, f"probe call: {describe_transport_error(exc)} after {time.perf_counter() - started:.1f} s"
    if not response.is_success:
        return FAIL, "probe call: " + status_reason(response, CHAT_PATH)
    took = time.perf_counter() - started
    return OK, f"probe call answered in {took:.1f} s"


async def check_openclaw(
    http: httpx.AsyncClient, oc: OpenClawSettings, *, chat: bool, timeout_s: float
) -> tuple[str, str]:
    status, detail = await probe_models(http, oc)
    if status != OK or not chat:
        return status, detail
    chat_status, chat_detail = await probe_chat(http, oc, timeout_s)
    return chat_status, f"{detail}; {chat_detail}"
