"""The ledger reserves before sending: two consumers of one job never both send; kill -9 stays safe."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from bridge.clients.http import build_http_client
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import Alert
from bridge.delivery.assembly import build_ledger, build_routes
from bridge.delivery.send import Deliverer, Result, Route
from bridge.settings import Settings
from bridge.stores.ledger import Ledger
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply, make_alert

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Consumer:
    """One replica's delivery path: its own Redis and HTTP clients, ledger owner and route."""

    deliverer: Deliverer
    route: Route

    async def deliver(self, alert: Alert) -> Result:
        return await self.deliverer.deliver(self.route, alert)


@contextlib.asynccontextmanager
async def consumers(
    settings: Settings, redis_url: str, count: int, *, same_id: bool = False
) -> AsyncIterator[list[Consumer]]:
    opened: list[tuple[aioredis.Redis, httpx.AsyncClient]] = []
    out: list[Consumer] = []
    try:
        for n in range(count):
            client, http = aioredis.Redis.from_url(redis_url), build_http_client(settings.http)
            opened.append((client, http))
            consumer_id = settings.redis.consumer_id if same_id else f"consumer-{n}"
            mine = settings.model_copy(update={
                "redis": settings.redis.model_copy(update={"consumer_id": consumer_id})})
            ledger = build_ledger(mine, client)
            [route] = build_routes(mine, http, client=client)
            out.append(Consumer(Deliverer(mine.delivery, ledger, Metrics(), Health()), route))
        yield out
    finally:
        for client, http in opened:
            await http.aclose()
            await client.aclose()


def hook_settings(make_settings: Callable[..., Settings], url: str, **delivery: float) -> Settings:
    return make_settings(
        sinks=[{"name": "hook", "type": "webhook", "url": f"{url}/in", "secret": "s"}],
        delivery={"request_timeout_s": 10.0, "base_delay_s": 0.01, "max_delay_s": 0.05, **delivery},
    )


async def wait_for_requests(receiver: Receiver, count: int, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while len(receiver.requests) < count:
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("second_starts", ["at_once", "while_first_sends"])
async def test_two_consumers_of_one_job_send_exactly_once(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis, second_starts: str
) -> None:
    """A reaped-but-alive consumer and its replacement: one POST, one delivered, one duplicate."""
    receiver = Receiver(default=Reply(delay_s=1.0))  # a slow receiver: the race window is wide
    alert = make_alert(job_id="race")
    async with serve(receiver.app) as url:
        settings = hook_settings(make_settings, url)
        async with consumers(settings, redis_url, 2) as (first, second):
            a = asyncio.create_task(first.deliver(alert))
            if second_starts == "while_first_sends":
                await wait_for_requests(receiver, 1)
            b = asyncio.create_task(second.deliver(alert))
            results = await asyncio.gather(a, b)
    assert len(receiver.requests) == 1
    assert sorted(r.outcome for r in results) == ["delivered", "duplicate"]
    assert await Ledger(aredis, 60).delivered("hook", alert)


async def test_a_failed_send_releases_its_reservation_for_the_other_consumer(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis
) -> None:
    receiver = Receiver(script=[Reply(400, delay_s=0.5)])  # first POST: a permanent error
    alert = make_alert(job_id="retry-me")
    async with serve(receiver.app) as url:
        settings = hook_settings(make_settings, url)
        async with consumers(settings, redis_url, 2) as (first, second):
            a = asyncio.create_task(first.deliver(alert))
            await wait_for_requests(receiver, 1)
            b = asyncio.create_task(second.deliver(alert))
            results = await asyncio.gather(a, b)
    assert [r.outcome for r in results] == ["undeliverable", "delivered"]
    assert [r.status for r in receiver.requests] == [400, 200]


@pytest.mark.parametrize("replacement", ["another_replica", "the_same_consumer_restarted"])
async def test_a_sender_killed_mid_send_holds_the_job_only_until_its_reservation_expires(
    make_settings: Callable[..., Settings], redis_url: str, aredis: aioredis.Redis, tmp_path: Path,
    replacement: str,
) -> None:
    """Another replica waits out the dead sender's reservation; its own restart takes it over."""
    restarted = replacement == "the_same_consumer_restarted"
    receiver = Receiver(script=[Reply(delay_s=5.0)])  # the doomed sender's POST never returns in time
    async with serve(receiver.app) as url:
        # restarted: a reservation that would outlive the test unless taken over
        settings = hook_settings(make_settings, url, reservation_ttl_s=600.0 if restarted else 1.0)
        # the replacement is built first, so it asks while the dead sender's reservation still holds
        async with consumers(settings, redis_url, 1, same_id=restarted) as [consumer]:
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.support.deliver_child", str(tmp_path / "bridge.toml"),
                "hook", "doomed", "1", cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
            )
            await wait_for_requests(receiver, 1)
            os.kill(child.pid, signal.SIGKILL)
            await child.wait()
            key = Ledger.key("hook", make_alert(job_id="doomed-0"))
            held, remaining_ms = await aredis.get(key), await aredis.pttl(key)
            measured_at = time.monotonic()
            assert held is not None and str(held).startswith("b'sending:test-1:")  # the dead owner's
            assert remaining_ms > 0, "the replacement asks while the reservation holds"
            async with asyncio.timeout(60):
                result = await consumer.deliver(make_alert(job_id="doomed-0"))
    assert result.outcome == "delivered"
    assert len(receiver.requests) == 2  # at least once: the dead sender's fate was unknown
    if not restarted:  # it held: the second send came no sooner than the reservation's remaining TTL
        waited = receiver.requests[1].at - measured_at
        assert waited >= remaining_ms / 1000 - 0.01, f"sent {waited:.3f}s after, reservation had {remaining_ms} ms"
    assert await Ledger(aredis, 60).delivered("hook", make_alert(job_id="doomed-0"))
