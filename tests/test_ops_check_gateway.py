"""`check`'s OpenClaw probe against scripted gateway answers (respx).

The real gateway's answers (tests/gateway/) are: 401 for a wrong token, 404
with the chat endpoint disabled, and a model list without `openclaw/<agent>`
for an unknown agent. Each must fail with its reason; the token never shows.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import respx

from bridge.commands.check import Result, check_gateway
from bridge.settings import Settings

GW = "http://gateway.test:18789"
TOKEN = "gw-token-never-shown"
LISTED = {"object": "list", "data": [{"id": "openclaw"}, {"id": "openclaw/default"},
                                     {"id": "openclaw/dlq-summarizer"}]}


async def run_check(make_settings: Callable[..., Settings], router: respx.MockRouter,
                    probe: bool = False, **openclaw: object) -> Result:
    settings = make_settings(openclaw={"url": GW, "token": TOKEN, "timeout_s": 2, **openclaw})
    async with httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)) as http:
        result = await check_gateway(settings, http, probe_chat=probe)
    assert TOKEN not in result.detail + result.target
    return result


async def test_listed_agent_is_ok_and_sends_token_and_agent(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    route = router.get(f"{GW}/v1/models").respond(200, json=LISTED)
    result = await run_check(make_settings, router)
    assert result.status == "ok" and "openclaw/dlq-summarizer listed" in result.detail
    request = route.calls[0].request
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["x-openclaw-agent-id"] == "dlq-summarizer"


async def test_wrong_token_fails_with_401_reason(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(401, json={"error": {"message": "Unauthorized"}})
    result = await run_check(make_settings, router)
    assert result.status == "FAIL" and "token rejected (HTTP 401)" in result.detail


async def test_disabled_endpoint_fails_with_404_reason(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(404, text="Not Found")
    result = await run_check(make_settings, router)
    assert result.status == "FAIL" and "endpoint disabled (HTTP 404)" in result.detail
    assert "chatCompletions.enabled" in result.detail


async def test_unknown_agent_fails_naming_what_is_listed(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(200, json=LISTED)
    result = await run_check(make_settings, router, agent="nosuch-agent")
    assert result.status == "FAIL" and "agent 'nosuch-agent' unknown" in result.detail
    assert "openclaw/dlq-summarizer" in result.detail


async def test_root_answering_200_is_not_enough(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/").respond(200, text="<html>Control UI</html>")
    router.get(f"{GW}/v1/models").respond(404)
    result = await run_check(make_settings, router)
    assert result.status == "FAIL"


async def test_probe_sends_one_tiny_chat_completion(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(200, json=LISTED)
    chat = router.post(f"{GW}/v1/chat/completions").respond(
        200, json={"choices": [{"message": {"role": "assistant", "content": '{"ok": true}'}}]})
    result = await run_check(make_settings, router, probe=True)
    assert result.status == "ok" and "probe call answered" in result.detail
    assert chat.call_count == 1
    assert len(chat.calls[0].request.content) < 400


async def test_probe_reports_the_gateways_refusal(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(200, json=LISTED)
    router.post(f"{GW}/v1/chat/completions").respond(
        400, json={"error": {"message": "Unknown agent 'dlq-summarizer'.", "type": "invalid_request_error"}})
    result = await run_check(make_settings, router, probe=True)
    assert result.status == "FAIL" and "Unknown agent" in result.detail


async def test_probe_timeout_fails(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").respond(200, json=LISTED)
    router.post(f"{GW}/v1/chat/completions").mock(side_effect=httpx.ReadTimeout("slow"))
    result = await run_check(make_settings, router, probe=True)
    assert result.status == "FAIL" and "probe call: timeout (ReadTimeout)" in result.detail


async def test_unreachable_gateway_fails(make_settings: Callable[..., Settings]) -> None:
    router = respx.MockRouter()
    router.get(f"{GW}/v1/models").mock(side_effect=httpx.ConnectError("refused"))
    result = await run_check(make_settings, router)
    assert result.status == "FAIL" and "ConnectError" in result.detail
