"""The OpenClaw path: every reply shape ends in a validated summary or a fallback.

Reply parsing runs against respx (a unit test of the client's reading); timeout, 429 and 5xx
also run against a real gateway process boundary on loopback (`loopback` below)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx

from bridge.clients.http import build_http_client
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.core.models import DeadLetter, Summary
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.stores import keys
from bridge.summarize.factory import build_summarizer
from bridge.summarize.openclaw_summarizer import OpenClawSummarizer
from bridge.summarize.prompt import unwrap_dead_letter
from bridge.summarize.runbooks import RunbookCatalog
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve

GW = "http://gateway.test"
CHAT = f"{GW}/v1/chat/completions"
TOKEN = "gw-token-123456789"

VALID = {
    "title": "orders: ship_order timed out talking to the warehouse API",
    "severity": "error",
    "likely_cause": "The warehouse API did not answer within 30 s.",
    "next_steps": ["Check warehouse API latency", "Redrive once it is healthy"],
    "runbook_hint": "timeout",
}


def chat(content: str, status: int = 200, **headers: str) -> httpx.Response:
    body = {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return httpx.Response(status, json=body, headers=headers)


def dead_letter(**fields: Any) -> DeadLetter:
    return normalize(envelope_entry(**fields), "dead_letter:orders")


class Rig:
    def __init__(self, summarizer: OpenClawSummarizer, router: respx.MockRouter,
                 metrics: Metrics, health: Health) -> None:
        self.summarizer, self.router, self.metrics, self.health = summarizer, router, metrics, health
        self.route = router.post(CHAT)

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(call.request.content) for call in self.route.calls]

    async def summarize(self, **fields: Any) -> Summary:
        return await self.summarizer.summarize(dead_letter(**fields))


@pytest.fixture
async def rig_factory(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> AsyncIterator[Callable[..., Rig]]:
    clients: list[httpx.AsyncClient] = []

    def build(runbooks: dict[str, Any] | None = None, **openclaw: Any) -> Rig:
        settings = make_settings(
            openclaw={"url": GW, "timeout_s": 1.0, **openclaw},
            environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN},
            **({"runbooks": runbooks} if runbooks else {}),
        )
        router = respx.MockRouter(assert_all_called=False)
        http = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        clients.append(http)
        metrics, health = Metrics(), Health()
        summarizer = build_summarizer(settings, RunbookCatalog.load(), aredis, http, metrics, health)
        assert isinstance(summarizer, OpenClawSummarizer)
        return Rig(summarizer, router, metrics, health)

    yield build
    for http in clients:
        await http.aclose()


@pytest.fixture
def rig(rig_factory: Callable[..., Rig]) -> Rig:
    return rig_factory()


async def test_valid_reply_is_used_and_request_is_well_formed(rig: Rig) -> None:
    rig.route.mock(return_value=chat(json.dumps(VALID)))
    summary = await rig.summarize()
    assert summary.source == "openclaw" and summary.fallback_reason is None
    assert summary.title == VALID["title"] and summary.runbook_hint == "timeout"
    assert summary.next_steps == VALID["next_steps"]
    request = rig.route.calls[0].request
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["x-openclaw-agent-id"] == "dlq-summarizer"
    body = json.loads(request.content)
    assert body["model"] == "openclaw/dlq-summarizer" and body["temperature"] == 0
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert set(schema["properties"]["runbook_hint"]["enum"]) == {*RunbookCatalog.load().ids(), ""}
    system, user = body["messages"]
    assert system["role"] == "system" and "one json object" in system["content"].lower()
    assert "- timeout: " not in system["content"] and "- timeout: " in user["content"]  # the runbooks that may fit
    wrapped = unwrap_dead_letter(user["content"])
    assert wrapped is not None
    envelope = json.loads(wrapped)
    assert envelope["queue"] == "orders" and envelope["job_name"] == "ship_order"
    assert "fingerprint" not in envelope


async def test_the_runbook_enum_is_the_whole_catalogue_and_a_contradicted_pick_is_repaired(rig: Rig) -> None:
    """Leaving contradicted ids out of the enum made the 1.5B model answer `unknown` instead (twice the misses,
    docs/benchmarks.md): every entry is offered the whole catalogue, and salvage repairs a contradicted pick."""
    rig.route.mock(return_value=chat(json.dumps({**VALID, "runbook_hint": "unparseable-payload"})))
    summary = await rig.summarize(last_error="ConnectionRefusedError: db:5432 refused")
    await rig.summarize(last_error=None)
    enums = [set(b["response_format"]["json_schema"]["schema"]["properties"]["runbook_hint"]["enum"])
             for b in rig.requests()]
    assert enums[0] == enums[1] == set(RunbookCatalog.load().ids()) | {""}
    assert summary.runbook_hint == "connection-refused" and summary.repairs == ("runbook_hint",)


async def test_no_token_no_authorization_header_and_no_response_format(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    settings = make_settings(openclaw={"url": GW, "token_env": "", "response_format": "none",
                                       "model": "openclaw:dlq-summarizer"})
    router = respx.MockRouter()
    route = router.post(CHAT).mock(return_value=chat(json.dumps(VALID)))
    async with httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)) as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(), aredis, http, Metrics(), Health())
        summary = await summarizer.summarize(dead_letter())
    assert summary.source == "openclaw"
    request = route.calls[0].request
    assert "authorization" not in request.headers
    body = json.loads(request.content)
    assert "response_format" not in body and body["model"] == "openclaw:dlq-summarizer"


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps(VALID, indent=2) + "\n```",
        "Here is the summary you asked for:\n" + json.dumps(VALID) + "\nHope this helps {not json}.",
        "Thinking {about it}... " + json.dumps(VALID),
    ],
    ids=["fenced", "prose-wrapped", "stray-brace-before"],
)
async def test_wrapped_replies_are_extracted(rig: Rig, content: str) -> None:
    rig.route.mock(return_value=chat(content))
    summary = await rig.summarize()
    assert summary.source == "openclaw"
    assert summary.title == VALID["title"] and summary.severity == "error"


@pytest.mark.parametrize(
    "reply",
    [
        {**VALID, "title": ""},
        {**VALID, "title": "https://evil.example/x"},
        {k: v for k, v in VALID.items() if k != "likely_cause"},
        {**VALID, "likely_cause": 42},
    ],
    ids=["empty-title", "title-only-a-link", "missing-cause", "cause-not-text"],
)
async def test_replies_without_a_title_or_cause_fall_back(rig: Rig, reply: dict[str, Any]) -> None:
    rig.route.mock(return_value=chat(json.dumps(reply)))
    summary = await rig.summarize()
    assert summary.source == "fallback" and summary.fallback_reason == "schema"
    assert summary.title == "orders: ship_order failed after 3 attempts"
    assert summary.likely_cause.startswith("TimeoutError: warehouse API timed out")  # docs/design.md, section 4
    assert summary.runbook_hint == "timeout"


@pytest.mark.parametrize(
    ("reply", "repaired", "check"),
    [
        ({**VALID, "severity": "urgent"}, "severity", lambda s: s.severity == "error"),
        ({**VALID, "title": "word " * 40}, "title", lambda s: len(s.title) <= 120 and s.title.endswith("…")),
        ({**VALID, "next_steps": "restart it"}, "next_steps", lambda s: s.next_steps[0].startswith("Check")),
        ({**VALID, "url": "https://evil.example/x", "sink": "pagerduty"}, "extra_keys", lambda s: True),
        ({**VALID, "next_steps": list("abcde")}, "next_steps", lambda s: s.next_steps == list("abcd")),
        ({**VALID, "runbook_hint": "reboot-the-world"}, "runbook_hint", lambda s: s.runbook_hint == "timeout"),
        ({**VALID, "runbook_hint": "https://evil.example/rb"}, "runbook_hint", lambda s: s.runbook_hint == "timeout"),
    ],
    ids=["bad-severity", "long-title", "steps-not-list", "extra-keys", "too-many-steps", "unknown-runbook",
         "url-runbook"],
)
async def test_one_bad_field_is_repaired_and_the_rest_kept(
    rig: Rig, reply: dict[str, Any], repaired: str, check: Callable[[Summary], bool]
) -> None:
    rig.route.mock(return_value=chat(json.dumps(reply)))
    summary = await rig.summarize()
    assert summary.source == "openclaw" and summary.repairs == (repaired,)
    assert summary.likely_cause == VALID["likely_cause"] and check(summary)
    assert f'dlq_bridge_summary_repairs_total{{field="{repaired}"}} 1.0'.encode() in rig.metrics.render()


@pytest.mark.parametrize(
    "response",
    [
        chat("I'm sorry, I cannot help with that."),
        chat(""),
        chat('{"title": "unterminated'),
        httpx.Response(200, text="<html>gateway</html>"),
        httpx.Response(200, json={"choices": []}),
        httpx.Response(200, json={"choices": [{"message": {"content": None}}]}),
    ],
    ids=["prose-only", "empty", "truncated-json", "html-body", "no-choices", "null-content"],
)
async def test_non_json_replies_fall_back(rig: Rig, response: httpx.Response) -> None:
    rig.route.mock(return_value=response)
    summary = await rig.summarize()
    assert summary.source == "fallback" and summary.fallback_reason == "invalid_json"
    assert summary.title == "orders: ship_order failed after 3 attempts"


async def test_http_500_falls_back_and_degrades_health(rig: Rig) -> None:
    rig.route.mock(return_value=httpx.Response(500, text="boom"))
    summary = await rig.summarize()
    assert summary.source == "fallback" and summary.fallback_reason == "http_500"
    check = rig.health.get("gateway")
    assert check is not None and check.status is Status.DEGRADED
    assert b'dlq_bridge_gateway_request_seconds_count{outcome="http_500"} 1.0' in rig.metrics.render()


async def test_429_honours_retry_after(rig: Rig) -> None:
    rig.route.mock(side_effect=[chat("", 429, **{"Retry-After": "30"}), chat(json.dumps(VALID))])
    first = await rig.summarize()
    assert first.source == "fallback" and first.fallback_reason == "http_429"
    # Within Retry-After no call is made, even for another fingerprint.
    second = await rig.summarize(job_name="other_job")
    assert second.source == "fallback" and second.fallback_reason == "http_429"
    assert rig.route.call_count == 1
    assert (await rig.summarizer.gate.admit()).verdict == "paused"
    assert b"dlq_bridge_gateway_circuit_open 1.0" in rig.metrics.render()


# --- over loopback: a real gateway process boundary (FakeGateway on uvicorn) and the bridge's own
# HTTP client (bridge.clients.http.build_http_client), for what the guarantees rest on: timeout, 429, 5xx.


@contextlib.asynccontextmanager
async def loopback(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, gateway: FakeGateway, **openclaw: Any
) -> AsyncIterator[tuple[OpenClawSummarizer, Metrics, Health]]:
    async with serve(gateway.app()) as url:
        settings = make_settings(openclaw={"url": url, **openclaw}, environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN})
        async with build_http_client(settings.http) as http:
            metrics, health = Metrics(), Health()
            summarizer = build_summarizer(settings, RunbookCatalog.load(), aredis, http, metrics, health)
            assert isinstance(summarizer, OpenClawSummarizer)
            yield summarizer, metrics, health


async def test_timeout_falls_back(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    """Order, not speed: the fallback comes while the gateway is still working on the request."""
    gateway = FakeGateway(latency_s=3.0)
    async with loopback(make_settings, aredis, gateway, timeout_s=0.3) as (summarizer, metrics, _):
        summary = await summarizer.summarize(dead_letter())
        still_working = gateway.in_flight
    assert summary.source == "fallback" and summary.fallback_reason == "timeout"
    assert gateway.calls == 1 and still_working == 1, "the bridge gave up before the gateway answered"
    assert b'dlq_bridge_gateway_request_seconds_count{outcome="timeout"} 1.0' in metrics.render()


async def test_over_loopback_429_holds_calls_and_500_falls_back(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    busy = FakeGateway(status=429, retry_after="30")
    async with loopback(make_settings, aredis, busy) as (summarizer, metrics, _):
        first = await summarizer.summarize(dead_letter())
        second = await summarizer.summarize(dead_letter(job_name="other_job"))
        assert (await summarizer.gate.admit()).verdict == "paused"
        assert b"dlq_bridge_gateway_circuit_open 1.0" in metrics.render()
    assert (first.fallback_reason, second.fallback_reason) == ("http_429", "http_429")
    assert busy.calls == 1, "within Retry-After no call is made, even for another fingerprint"
    await aredis.flushdb()
    failing = FakeGateway(status=500)
    async with loopback(make_settings, aredis, failing) as (summarizer, _, health):
        summary = await summarizer.summarize(dead_letter())
    assert summary.source == "fallback" and summary.fallback_reason == "http_500" and failing.calls == 1
    check = health.get("gateway")
    assert check is not None and check.status is Status.DEGRADED


async def test_transport_timeout_and_connection_error(rig: Rig) -> None:
    rig.route.mock(side_effect=[httpx.ReadTimeout("slow"), httpx.ConnectError("refused")])
    assert (await rig.summarize()).fallback_reason == "timeout"
    assert (await rig.summarize(job_name="b")).fallback_reason == "error"


async def test_cache_hit_and_only_successes_are_cached(rig: Rig, aredis: aioredis.Redis) -> None:
    rig.route.mock(side_effect=[httpx.Response(503), chat(json.dumps(VALID))])
    dl = dead_letter()
    assert (await rig.summarizer.summarize(dl)).fallback_reason == "http_503"
    assert await aredis.get(keys.summary(dl.fingerprint)) is None
    assert (await rig.summarizer.summarize(dl)).source == "openclaw"
    ttl = await aredis.ttl(keys.summary(dl.fingerprint))
    assert 3500 < ttl <= 3600
    hit = await rig.summarizer.summarize(dead_letter(job_id="job-2", attempts=5))
    assert hit.source == "cache" and hit.title == VALID["title"]
    assert rig.route.call_count == 2


async def test_concurrent_identical_fingerprints_share_one_call(rig: Rig) -> None:
    async def slow(_request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.1)
        return chat(json.dumps(VALID))

    rig.route.mock(side_effect=slow)
    summaries = await asyncio.gather(*(rig.summarize(job_id=f"j{i}") for i in range(20)))
    assert rig.route.call_count == 1
    assert sorted(s.source.value for s in summaries) == ["cache"] * 19 + ["openclaw"]


async def test_gateway_concurrency_is_bounded(rig_factory: Callable[..., Rig]) -> None:
    rig = rig_factory(max_concurrency=2)
    in_flight, peak = 0, 0

    async def slow(_request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return chat(json.dumps(VALID))

    rig.route.mock(side_effect=slow)
    summaries = await asyncio.gather(*(rig.summarize(job_name=f"job{i}") for i in range(6)))
    assert {s.source.value for s in summaries} == {"openclaw"}
    assert rig.route.call_count == 6 and peak == 2


async def test_concurrent_failures_fall_back_per_entry(rig: Rig) -> None:
    async def slow_fail(_request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        return httpx.Response(502)

    rig.route.mock(side_effect=slow_fail)
    a, b = await asyncio.gather(rig.summarize(attempts=2), rig.summarize(attempts=7))
    assert rig.route.call_count == 1
    assert (a.fallback_reason, b.fallback_reason) == ("http_502", "http_502")
    assert "after 2 attempts" in a.title and "after 7 attempts" in b.title


async def test_redis_down_is_a_cache_miss(make_settings: Callable[..., Settings]) -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    from tests.support.redis_server import free_port

    settings = make_settings(openclaw={"url": GW}, environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN})
    dead_redis = aioredis.Redis(port=free_port(), socket_connect_timeout=0.2,
                                retry=Retry(NoBackoff(), 0))
    router = respx.MockRouter()
    route = router.post(CHAT).mock(return_value=chat(json.dumps(VALID)))
    async with httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)) as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(), dead_redis, http, Metrics(), Health())
        first = await summarizer.summarize(dead_letter())
        second = await summarizer.summarize(dead_letter())
    await dead_redis.aclose()
    assert first.source == "openclaw" and second.source == "openclaw"
    assert route.call_count == 2


async def test_breaker_opens_then_half_opens(rig_factory: Callable[..., Rig]) -> None:
    rig = rig_factory(breaker_failures=3, breaker_cooldown_s=0.3)
    rig.route.mock(return_value=httpx.Response(500))
    reasons = [(await rig.summarize(job_name=f"job{i}")).fallback_reason for i in range(5)]
    assert reasons == ["http_500"] * 3 + ["circuit_open"] * 2
    assert rig.route.call_count == 3
    check = rig.health.get("gateway")
    assert check is not None and check.status is Status.DEGRADED and check.detail == "circuit open"
    await asyncio.sleep(0.35)
    rig.route.mock(return_value=chat(json.dumps(VALID)))
    assert (await rig.summarize(job_name="probe")).source == "openclaw"
    check = rig.health.get("gateway")
    assert check is not None and check.status is Status.OK
    assert b"dlq_bridge_gateway_circuit_open 0.0" in rig.metrics.render()


async def test_budget_limits_calls_per_minute(rig_factory: Callable[..., Rig]) -> None:
    rig = rig_factory(calls_per_minute=2, cache_ttl_s=0)
    rig.route.mock(return_value=chat(json.dumps(VALID)))
    sources = [(await rig.summarize(job_name=f"job{i}")) for i in range(4)]
    assert [s.fallback_reason for s in sources] == [None, None, "budget", "budget"]
    assert rig.route.call_count == 2


async def test_model_text_is_cleaned_of_urls_and_secrets(rig: Rig) -> None:
    reply = {**VALID, "likely_cause": "See https://evil.example/login and use AKIAABCDEFGHIJKLMNOP",
             "next_steps": ["Call http://warehouse.internal:8080/health"]}
    rig.route.mock(return_value=chat(json.dumps(reply)))
    summary = await rig.summarize(last_error="ConnectError: http://warehouse.internal:8080/health refused")
    assert summary.source == "openclaw"
    assert "evil.example" not in summary.likely_cause and "[link removed]" in summary.likely_cause
    assert "AKIA" not in summary.likely_cause
    # even a URL the dead letter holds is removed: the producer wrote it, so it is untrusted too
    assert summary.next_steps == ["Call [link removed]"]


async def test_disabled_when_no_openclaw_section(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    settings = make_settings()
    health = Health()
    async with httpx.AsyncClient() as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(), aredis, http, Metrics(), health)
        summary = await summarizer.summarize(dead_letter())
    assert summary.source == "fallback" and summary.fallback_reason == "disabled"
    check = health.get("gateway")
    assert check is not None and check.status is Status.OK


async def test_model_links_survive_only_under_the_configured_runbook_base(rig_factory: Callable[..., Rig]) -> None:
    rig = rig_factory(runbooks={"base_url": "https://runbooks.acme.io"})
    cause = "See https://runbooks.acme.io/timeout.md, not https://evil.example/fix or runbooks.acme.io.evil.com."
    rig.route.mock(return_value=chat(json.dumps({**VALID, "likely_cause": cause})))
    summary = await rig.summarize()
    assert summary.source == "openclaw"
    assert "https://runbooks.acme.io/timeout.md" in summary.likely_cause
    assert "evil" not in summary.likely_cause


async def test_response_format_json_object_sends_the_plain_json_mode(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    settings = make_settings(openclaw={"url": GW, "token_env": "", "response_format": "json_object"})
    router = respx.MockRouter()
    route = router.post(CHAT).mock(return_value=chat(json.dumps(VALID)))
    async with httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)) as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(), aredis, http, Metrics(), Health())
        assert (await summarizer.summarize(dead_letter())).source == "openclaw"
    assert json.loads(route.calls[0].request.content)["response_format"] == {"type": "json_object"}
