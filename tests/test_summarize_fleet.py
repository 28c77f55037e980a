"""The gateway gate is fleet-wide (real Redis, a real local gateway), and a brief 429 is waited out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import redis.asyncio as aioredis

from bridge.clients.http import build_http_client
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import DeadLetter, Summary
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.summarize.factory import build_summarizer
from bridge.summarize.openclaw_summarizer import OpenClawSummarizer
from bridge.summarize.runbooks import RunbookCatalog
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve


def dead_letter(**fields: Any) -> DeadLetter:
    return normalize(envelope_entry(**fields), "dead_letter:orders")


@dataclass
class Replica:
    summarizer: OpenClawSummarizer
    metrics: Metrics

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


@contextlib.asynccontextmanager
async def replicas(
    make_settings: Callable[..., Settings],
    aredis: aioredis.Redis,
    gateway: FakeGateway,
    count: int = 1,
    **openclaw: Any,
) -> AsyncIterator[list[Replica]]:
    """`count` summarizers, each with its own HTTP client and metrics: replicas sharing Redis."""
    async with serve(gateway.app()) as url:
        settings = make_settings(openclaw={"url": url, "timeout_s": 2.0, **openclaw},
                                 environ={"OPENCLAW_GATEWAY_TOKEN": "t"})
        clients: list[httpx.AsyncClient] = []
        out: list[Replica] = []
        for _ in range(count):
            http = build_http_client(settings.http)
            clients.append(http)
            metrics = Metrics()
            s = build_summarizer(settings, RunbookCatalog.load(), aredis, http, metrics, Health())
            assert isinstance(s, OpenClawSummarizer)
            out.append(Replica(s, metrics))
        try:
            yield out
        finally:
            for http in clients:
                await http.aclose()


def sources(summaries: list[Summary]) -> Counter[str]:
    return Counter(s.source.value if s.fallback_reason is None else f"fallback:{s.fallback_reason}"
                   for s in summaries)


async def test_a_brief_429_is_waited_out_with_one_call_per_cause(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """Issue 10 defect 2: a 6-entry same-cause storm during a 1 s 429 gets ONE model call, 0 fallbacks."""
    gateway = FakeGateway(busy_for_s=1.0, retry_after="1")
    async with replicas(make_settings, aredis, gateway) as [replica]:
        storm = [dead_letter(job_id=f"j{i}") for i in range(6)]
        summaries = await asyncio.gather(*(replica.summarizer.summarize(d) for d in storm))
    assert sources(summaries) == {"openclaw": 1, "cache": 5}
    assert (gateway.answered_429, gateway.answered_ok) == (1, 1)
    assert replica.sample("dlq_bridge_gateway_waits_total") == 1


async def test_a_pause_longer_than_max_wait_falls_back_with_its_reason(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(busy_for_s=60.0, retry_after="30")
    async with replicas(make_settings, aredis, gateway, max_wait_s=10) as [replica]:
        first = await replica.summarizer.summarize(dead_letter(job_id="a"))
        other = await replica.summarizer.summarize(dead_letter(job_id="b", job_name="other"))
    assert (first.fallback_reason, other.fallback_reason) == ("http_429", "http_429")
    assert gateway.calls == 1  # the pause refuses the second cause without a call
    assert replica.sample("dlq_bridge_gateway_waits_total") == 0
    assert replica.sample("dlq_bridge_gateway_circuit_open") == 1


async def test_max_wait_zero_restores_the_immediate_fallback(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(busy_for_s=1.0, retry_after="1")
    async with replicas(make_settings, aredis, gateway, max_wait_s=0) as [replica]:
        summary = await replica.summarizer.summarize(dead_letter())
    assert summary.fallback_reason == "http_429" and gateway.calls == 1


async def test_a_429_seen_by_one_replica_pauses_the_others(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(busy_for_s=0.5, retry_after="30")
    async with replicas(make_settings, aredis, gateway, count=2) as [a, b]:
        assert (await a.summarizer.summarize(dead_letter())).fallback_reason == "http_429"
        await asyncio.sleep(0.6)  # the gateway itself is fine again; the shared pause is not over
        assert (await b.summarizer.summarize(dead_letter(job_name="x"))).fallback_reason == "http_429"
    assert gateway.calls == 1


async def test_the_breaker_is_shared_by_every_replica(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(status=503)
    async with replicas(make_settings, aredis, gateway, count=3,
                        breaker_failures=3, breaker_cooldown_s=60) as fleet:
        for i, replica in enumerate(fleet):  # one failure on each replica: 3 in all
            summary = await replica.summarizer.summarize(dead_letter(job_name=f"n{i}"))
            assert summary.fallback_reason == "http_503"
        late = [await r.summarizer.summarize(dead_letter(job_name=f"late{i}")) for i, r in enumerate(fleet)]
    assert [s.fallback_reason for s in late] == ["circuit_open"] * 3
    assert gateway.calls == 3


async def test_the_half_open_probe_goes_to_one_replica_and_closes_for_all(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(status=503, latency_s=0.3)
    async with replicas(make_settings, aredis, gateway, count=2,
                        breaker_failures=1, breaker_cooldown_s=0.3) as [a, b]:
        assert (await a.summarizer.summarize(dead_letter())).fallback_reason == "http_503"
        await asyncio.sleep(0.35)
        gateway.status = 200
        probe, refused = await asyncio.gather(
            a.summarizer.summarize(dead_letter(job_name="p")),
            b.summarizer.summarize(dead_letter(job_name="q")),
        )
        after = await b.summarizer.summarize(dead_letter(job_name="r"))
    assert sorted([probe.source.value, refused.fallback_reason or ""]) == ["circuit_open", "openclaw"]
    assert after.source.value == "openclaw"
    assert gateway.calls == 3


async def test_the_calls_per_minute_budget_is_shared(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway()
    async with replicas(make_settings, aredis, gateway, count=3, calls_per_minute=4) as fleet:
        summaries = [await fleet[i % 3].summarizer.summarize(dead_letter(job_name=f"n{i}"))
                     for i in range(7)]
    assert [s.fallback_reason for s in summaries] == [None] * 4 + ["budget"] * 3
    assert gateway.calls == 4


async def test_schema_failures_never_open_the_breaker(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(responder=lambda _e: json.dumps({"title": "x", "severity": "panic"}))
    async with replicas(make_settings, aredis, gateway, breaker_failures=2) as [replica]:
        summaries = [await replica.summarizer.summarize(dead_letter(job_name=f"n{i}")) for i in range(5)]
    assert {s.fallback_reason for s in summaries} == {"schema"}
    assert gateway.calls == 5
    assert replica.sample("dlq_bridge_gateway_circuit_open") == 0


async def test_a_storm_of_one_cause_across_three_replicas_costs_one_gateway_call(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """Issue 11: every replica misses the cache at once; one leads the call, the others read its answer."""
    gateway = FakeGateway(latency_s=0.5)
    async with replicas(make_settings, aredis, gateway, count=3) as fleet:
        storm = [r.summarizer.summarize(dead_letter(job_id=f"{n}-{i}")) for n, r in enumerate(fleet) for i in range(4)]
        summaries = await asyncio.gather(*storm)
    assert gateway.calls == 1
    assert sources(summaries) == {"openclaw": 1, "cache": 11}
    assert await aredis.keys("dlq_bridge:summary-lead:*") == [], "the lead is released after the call"


async def test_a_lead_left_by_a_killed_replica_only_delays_the_call_until_it_expires(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    from bridge.stores import keys

    gateway = FakeGateway()
    letter = dead_letter()
    async with replicas(make_settings, aredis, gateway) as [replica]:  # built first: it asks while held
        await aredis.set(keys.summary_lead(letter.fingerprint), "dead-replica", px=800)  # never released
        remaining_ms, measured_at = await aredis.pttl(keys.summary_lead(letter.fingerprint)), time.monotonic()
        summary = await replica.summarizer.summarize(letter)
    assert summary.source == "openclaw" and summary.fallback_reason is None
    assert gateway.calls == 1
    waited = gateway.arrivals[0] - measured_at
    assert remaining_ms > 0 and waited >= remaining_ms / 1000 - 0.01, f"{waited:.3f}s, lead {remaining_ms} ms"


async def test_a_leader_that_fell_back_lets_the_next_replica_ask_again(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """No answer is shared from a failed call: the follower calls itself (and the breaker counts both)."""
    gateway = FakeGateway(status=503, latency_s=0.3)
    async with replicas(make_settings, aredis, gateway, count=2, breaker_failures=5) as [a, b]:
        first, second = await asyncio.gather(a.summarizer.summarize(dead_letter(job_id="a")),
                                             b.summarizer.summarize(dead_letter(job_id="b")))
    assert (first.fallback_reason, second.fallback_reason) == ("http_503", "http_503")
    assert gateway.calls == 2


async def test_a_call_slower_than_the_lead_expiry_keeps_its_lead(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    from bridge.stores.summary_cache import LEAD_TTL_S

    gateway = FakeGateway(latency_s=LEAD_TTL_S + 1.5)
    async with replicas(make_settings, aredis, gateway, count=2, timeout_s=30.0) as [a, b]:
        first = asyncio.create_task(a.summarizer.summarize(dead_letter(job_id="a")))
        await asyncio.sleep(0.3)
        second = await b.summarizer.summarize(dead_letter(job_id="b"))
        await first
    assert second.source == "cache" and gateway.calls == 1
