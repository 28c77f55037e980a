"""Issue 25's storm: one outage over 12 queues and three kinds is one incident and a few messages.

Through three running `dlq-bridge run` replicas, real Redis, real RQ and Sidekiq workers and local
receivers that enforce Slack's and PagerDuty's real rate limits (docs/design.md, section 5d):

- 12 queues fail for 60 s with the same connection error to one host: 8 Redis-list DLQs (2,000 dead
  letters pushed in 20 waves, one every 3 s), 2 RQ queues and 2 Sidekiq queues (400 jobs failed by
  real workers in three bursts during the outage); 2,400 dead letters in all;
- Slack grouped by cause, PagerDuty by its default (cause), both with the default timers
  (group_wait 10 s, group_interval 60 s) and the default pacing (1 message/s, 120 events/min);
- mid-outage, one unrelated failure in one of those queues;
- an OpenClaw gateway (a local fake whose "model" takes 1 s) summarizing for all three replicas.

Expected: 1 PagerDuty incident and at most 3 Slack messages for the outage, the first within
group_wait + 10 s of the first dead letter; the unrelated failure alerted on its own, on Slack and
PagerDuty, within 45 s; 0 lost (every list entry archived once, the incident's count 2,400); one
gateway call for the outage, shown the cause alone, and one for the unrelated failure.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import Request, Response

from bridge.stores import keys
from tests.support.bridge_process import start_bridge, write_config
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.receiver import Received, Receiver, Reply
from tests.support.redis_server import free_port
from tests.test_storm_fleet import in_all, stop, wait_for
from tests.test_summarize_by_cause import model_input

# 60 s of outage, then up to two group_intervals (60 s each) for the last digest; minutes more on a
# loaded 2-core machine (three replicas, peers' workers)
pytestmark = [pytest.mark.failure, pytest.mark.timeout(420)]

OUTAGE = "ConnectionRefusedError: postgres-primary:5432 refused connection (order {i})"
LIST_QUEUES = [f"inventory-{n:02d}" for n in range(8)]
RQ_QUEUES = ["rq-reindex", "rq-export"]
SIDEKIQ_QUEUES = ["sq-inventory", "sq-pricing"]
PER_LIST, PER_PEER = 250, 100  # 8 × 250 + 4 × 100 = 2,400
WAVES, WAVE_S = 20, 3.0  # the outage lasts WAVES × WAVE_S = 60 s
PEER_BURSTS_AT = (1, 7, 13)  # the waves at whose start the peers' workers fail a third of their jobs
UNRELATED_AT = 10  # the wave at which the unrelated failure arrives (30 s into the outage)
GROUP_WAIT_S = 10.0  # the default
TOTAL = PER_LIST * len(LIST_QUEUES) + PER_PEER * (len(RQ_QUEUES) + len(SIDEKIQ_QUEUES))


class Limited(Receiver):
    """A receiver with the service's rate limit: a token bucket of `burst`, refilled at `per_s`;
    a request finding it empty is answered 429 with Retry-After and not recorded as accepted."""

    def __init__(self, per_s: float, burst: float, default: Reply | None = None) -> None:
        super().__init__(default=default)
        self.per_s, self.burst, self.tokens, self.at = per_s, burst, burst, time.monotonic()
        self.refused: list[Received] = []

    async def _handle(self, request: Request, path: str) -> Response:
        now = time.monotonic()
        self.tokens, self.at = min(self.burst, self.tokens + (now - self.at) * self.per_s), now
        if self.tokens < 1:
            self.refused.append(Received(now, path, dict(request.headers), await request.body(), 429))
            return Response("rate limited", status_code=429, headers={"Retry-After": "1"})
        self.tokens -= 1
        return await super()._handle(request, path)


def peers_missing() -> str | None:
    from tests.kinds import producers

    return producers.rq_missing() or producers.sidekiq_missing()


class PeerBursts(threading.Thread):
    """Real RQ and Sidekiq workers fail a third of their jobs on each of their queues, with the
    outage's error, at each of `PEER_BURSTS_AT` (waves after `started`)."""

    def __init__(self, redis_url: str, started: float) -> None:
        super().__init__(daemon=True)
        self.redis_url, self.started = redis_url, started
        self.errors: list[BaseException] = []

    def run(self) -> None:
        from tests.kinds import producers

        try:
            for wave, n in zip(PEER_BURSTS_AT, (34, 33, 33), strict=True):
                time.sleep(max(0.0, self.started + wave * WAVE_S - time.monotonic()))
                for queue in RQ_QUEUES:
                    producers.produce_rq(self.redis_url, queue, n, job="sync_inventory")
                for queue in SIDEKIQ_QUEUES:
                    producers.produce_sidekiq(self.redis_url, n, worker="SyncInventoryWorker", queue=queue)
        except BaseException as exc:
            self.errors.append(exc)


def list_entries(queue: str) -> list[str]:
    return [json.dumps({"queue": queue, "job_id": f"{queue}-{i}", "job_name": "sync_inventory",
                        "last_error": OUTAGE.format(i=i)}) for i in range(PER_LIST)]


BATCHES = {q: list_entries(q) for q in LIST_QUEUES}
UNRELATED = json.dumps({"queue": "inventory-03", "job_id": "odd-1", "job_name": "price_update",
                        "last_error": "KeyError: 'sku-991' not in catalogue"})


def replica_config(tmp_path: Path, redis_url: str, n: int, port: int, sinks: list[dict[str, Any]],
                   gateway_url: str) -> Path:
    return write_config(tmp_path / f"outage-{n}.toml", {
        "openclaw": {"url": gateway_url, "token": "storm-gateway-token", "timeout_s": 30},
        "server": {"port": port, "grace_s": 5},
        "redis": {"url": redis_url, "consumer_id": f"outage-{n}"},
        "sources": {"concurrency": 8, "poll_interval_s": 0.01, "heartbeat_interval_s": 0.5,
                    "heartbeat_ttl_s": 2, "reap_interval_s": 0.5},
        "sources.rq": [{"queues": RQ_QUEUES}],
        "sources.sidekiq": [{"lease_s": 5}],
        "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.1, "lease_s": 2, "reservation_ttl_s": 2},
        "sinks": sinks,
    })


async def serving(port: int) -> bool:
    async with httpx.AsyncClient() as client:
        try:
            await client.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0)
        except httpx.HTTPError:
            return False
    return True


def outage(body: bytes) -> bool:
    return b"postgres-primary" in body


def unrelated(body: bytes) -> bool:
    return b"sku-" in body


def pd_count(r: Received) -> int:
    return int(json.loads(r.body)["payload"]["custom_details"].get("count", 1))


def slack_count(r: Received) -> int:
    return in_all(json.loads(r.body)["text"])


@dataclass
class Outage:
    started: float  # the outage's first dead letter (time.monotonic())
    unrelated_at: float
    lasted_s: float


async def sixty_seconds_of_outage(aredis: aioredis.Redis, redis_url: str) -> Outage:
    """The list DLQs' waves, the peers' bursts and the unrelated failure; returns once the peers are done."""
    started = time.monotonic()
    peers = PeerBursts(redis_url, started)
    peers.start()
    unrelated_at = 0.0
    try:
        for wave in range(WAVES):
            lo, hi = wave * PER_LIST // WAVES, (wave + 1) * PER_LIST // WAVES
            for queue in LIST_QUEUES:
                await aredis.lpush(f"dead_letter:{queue}", *BATCHES[queue][lo:hi])
            if wave == UNRELATED_AT:
                unrelated_at = time.monotonic()
                await aredis.lpush("dead_letter:inventory-03", UNRELATED)
            await asyncio.sleep(max(0.0, started + (wave + 1) * WAVE_S - time.monotonic()))
        lasted_s = time.monotonic() - started
    finally:
        await asyncio.to_thread(peers.join, 180)
    assert not peers.is_alive() and not peers.errors, f"the peers' workers failed: {peers.errors}"
    return Outage(started, unrelated_at, lasted_s)


async def test_a_60_s_outage_over_12_queues_and_3_kinds_through_3_replicas_is_1_incident_and_few_messages(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    if (missing := peers_missing()) is not None:
        pytest.skip(missing)
    slack = Limited(per_s=1.0, burst=2.0)  # Slack: 1 message/s per webhook, short bursts allowed
    pagerduty = Limited(per_s=2.0, burst=120.0, default=Reply(202))  # PagerDuty: 120 events/min per key
    gateway = FakeGateway(latency_s=1.0)  # an OpenClaw gateway whose model takes a second per summary
    procs: list[subprocess.Popen[bytes]] = []
    async with serve(slack.app) as s, serve(pagerduty.app) as p, serve(gateway.app()) as gw:
        sinks = [
            {"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", "group_by": "cause"},
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue"},
        ]
        ports = [free_port() for _ in range(3)]
        procs = [start_bridge(["--config", str(replica_config(tmp_path, redis_url, n, port, sinks, gw)), "run"])
                 for n, port in enumerate(ports)]
        try:
            for port in ports:
                assert await wait_for(lambda port=port: serving(port), 60, procs), "a replica never served"
            run = await sixty_seconds_of_outage(aredis, redis_url)

            async def settled() -> bool:
                pd = [r for r in pagerduty.requests if outage(r.body)]
                sl = [r for r in slack.requests if outage(r.body)]
                return (bool(pd) and pd_count(pd[-1]) == TOTAL and bool(sl) and slack_count(sl[-1]) == TOTAL
                        and all(any(unrelated(r.body) for r in x.requests) for x in (slack, pagerduty)))

            assert await wait_for(settled, 240, procs), (
                [pd_count(r) for r in pagerduty.requests if outage(r.body)],
                [slack_count(r) for r in slack.requests if outage(r.body)])
            await asyncio.sleep(5)  # nothing else may come for the outage
        finally:
            stop(procs)

    for queue in LIST_QUEUES:
        archived = await aredis.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1)
        expected = BATCHES[queue] + ([UNRELATED] if queue == "inventory-03" else [])
        assert sorted(a.decode() for a in archived) == sorted(expected), f"{queue}: every entry archived once"
    outage_pd = [r for r in pagerduty.requests if outage(r.body)]
    outage_slack = [r for r in slack.requests if outage(r.body)]
    incidents = {json.loads(r.body)["dedup_key"] for r in outage_pd}
    assert len(incidents) == 1, f"one PagerDuty incident for the outage: {incidents}"
    last = json.loads(outage_pd[-1].body)["payload"]
    details = last["custom_details"]
    assert details["count"] == TOTAL, "0 lost"
    assert details["queues"] == {**dict.fromkeys(LIST_QUEUES, PER_LIST),
                                 **dict.fromkeys(RQ_QUEUES + SIDEKIQ_QUEUES, PER_PEER)}
    assert details["kinds"] == {"list": PER_LIST * len(LIST_QUEUES), "rq": PER_PEER * len(RQ_QUEUES),
                                "sidekiq": PER_PEER * len(SIDEKIQ_QUEUES)}
    assert last["summary"].startswith(f"postgres-primary:5432 unreachable — 12 queues, {TOTAL:,} jobs"), last
    assert len(outage_slack) <= 3, f"{len(outage_slack)} Slack messages for one outage"
    assert slack_count(outage_slack[-1]) == TOTAL
    first_slack, first_pd = outage_slack[0].at - run.started, outage_pd[0].at - run.started
    assert first_slack <= GROUP_WAIT_S + 10, f"the first Slack message came {first_slack:.1f} s into the outage"
    assert first_pd <= GROUP_WAIT_S + 10, f"the first PagerDuty event came {first_pd:.1f} s into the outage"
    [odd_slack] = [r for r in slack.requests if unrelated(r.body)]
    [odd_pd] = [r for r in pagerduty.requests if unrelated(r.body)]
    for name, odd in (("Slack", odd_slack), ("PagerDuty", odd_pd)):
        assert not outage(odd.body), f"the unrelated failure has its own {name} alert"
        late = odd.at - run.unrelated_at
        assert late <= 45, f"the unrelated failure reached {name} {late:.1f} s after it was pushed"
    assert json.loads(odd_pd.body)["dedup_key"] not in incidents
    asked = [model_input(body) for body in gateway.bodies]
    outage_calls = [a for a in asked if a.get("shared_cause")]
    assert len(outage_calls) == 1, f"{len(outage_calls)} gateway calls for one outage (one per cause, fleet-wide)"
    assert outage_calls[0]["dependency"] == "postgres-primary:5432"
    assert [a["job_name"] for a in asked if not a.get("shared_cause")] == ["price_update"]
    print(f"\noutage storm: {TOTAL:,} dead letters over {run.lasted_s:.0f} s (8 list queues, 2 RQ queues, "
          f"2 Sidekiq queues: real workers), 3 replicas, Slack 1 msg/s and PagerDuty 120 events/min enforced "
          f"(429s: Slack {len(slack.refused)}, PagerDuty {len(pagerduty.refused)}): "
          f"PagerDuty incidents {len(incidents)} ({len(outage_pd)} events), Slack messages {len(outage_slack)}, "
          f"first Slack {first_slack:.1f} s and first PagerDuty {first_pd:.1f} s into the outage "
          f"(group_wait {GROUP_WAIT_S:.0f} s), unrelated failure on Slack after "
          f"{odd_slack.at - run.unrelated_at:.1f} s and on PagerDuty after {odd_pd.at - run.unrelated_at:.1f} s, "
          f"lost {TOTAL - details['count']}; gateway calls {gateway.calls} (outage {len(outage_calls)})")
