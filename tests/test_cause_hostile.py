"""Hostile text cannot merge or hide (issue 25, docs/design.md section 5d).

A producer of the `reports` DLQ writes the `payments` outage's exact error text into its own
dead letters, first, so its job even opens the cause group. Through a running `dlq-bridge run`
with real Redis and real local receivers:

- it joins the PagerDuty cause group and is listed in the group's queues;
- it cannot make the payments failures disappear: every payments job is counted, and the
  payments team's Slack gets its own card of its own jobs only (routing stays per entry);
- it cannot stop the group paging: the incident is triggered, and redriving every one of
  its own jobs does not resolve it; only when the payments jobs are gone too is it resolved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bridge.core.resolves import incident_key
from bridge.delivery.resolve import enqueue_resolve
from bridge.intake.cause import cause_key
from bridge.stores import keys
from tests.support.bridge_process import start_bridge
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.test_storm_fleet import config, grouped, in_all, stop, wait_for

OUTAGE = "ConnectionRefusedError: payments-db:5432 refused connection (request {i})"
PAYMENTS, ATTACKER = 20, 30


def entries(queue: str, n: int, job_name: str) -> list[str]:
    return [json.dumps({"queue": queue, "job_id": f"{queue}-{i}", "job_name": job_name,
                        "last_error": OUTAGE.format(i=i)}) for i in range(n)]


def bodies(receiver: Receiver, path: str = "") -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.requests if r.path.endswith(path)]


async def test_a_producer_copying_another_queues_error_joins_the_group_but_cannot_hide_or_silence_it(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    slack, pagerduty = Receiver(), Receiver(default=Reply(202))
    async with serve(slack.app) as s, serve(pagerduty.app) as p:
        sinks = [
            {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": f"{p}/v2/enqueue",
             "group_by": "cause", **grouped()},
            {"name": "payments-team", "type": "slack", "url": f"{s}/services/T/B/PAY", "queues": ["payments"],
             "messages_per_second": 20, "group_by": "cause", **grouped()},
            {"name": "reports-team", "type": "slack", "url": f"{s}/services/T/B/REP", "queues": ["reports"],
             "messages_per_second": 20, "group_by": "cause", **grouped()},
        ]
        procs = [start_bridge(["--config", str(config(tmp_path, redis_url, "hostile", sinks)), "run"])]
        try:
            await aredis.lpush("dead_letter:reports", *entries("reports", ATTACKER, "export_csv"))

            async def attacker_in() -> bool:
                return int(await aredis.llen(keys.alerted("dead_letter:reports"))) == ATTACKER

            assert await wait_for(attacker_in, 30, procs)
            await aredis.lpush("dead_letter:payments", *entries("payments", PAYMENTS, "charge_card"))

            async def grouped_all() -> bool:
                pd = bodies(pagerduty)
                pay, rep = bodies(slack, "PAY"), bodies(slack, "REP")
                return (bool(pd) and pd[-1]["payload"]["custom_details"].get("count") == PAYMENTS + ATTACKER
                        and bool(pay) and in_all(pay[-1]["text"]) == PAYMENTS
                        and bool(rep) and in_all(rep[-1]["text"]) == ATTACKER)

            assert await wait_for(grouped_all, 60, procs), (bodies(pagerduty), bodies(slack))
            triggers = bodies(pagerduty)
            [incident] = {e["dedup_key"] for e in triggers}
            attackers = {f"reports-{n}" for n in range(ATTACKER)}  # entries run concurrently: any one may be first
            assert incident in attackers, "the attacker's job opened the group: the incident bears its key"
            last = triggers[-1]["payload"]
            assert last["custom_details"]["queues"] == {"reports": ATTACKER, "payments": PAYMENTS}
            assert last["summary"].startswith("payments-db:5432 unreachable"), last["summary"]
            assert (last["component"], last["class"]) == ("payments-db:5432", "ConnectionRefusedError"), (
                "the group's component is its dependency, not the first job's queue (the attacker's)")
            assert "payments ×20" in last["summary"] and "charge_card ×20" in last["summary"]

            for card in bodies(slack, "PAY"):
                text = json.dumps(card)
                assert "reports" not in text and "export_csv" not in text, "routing stays per entry"
            for card in bodies(slack, "REP"):
                text = json.dumps(card)
                assert "charge_card" not in text and "payments ×" not in text and "payments-1" not in text, text

            cause = cause_key(OUTAGE.format(i=0))

            async def redrive(queue: str, n: int) -> None:
                for i in range(n):
                    await enqueue_resolve(aredis, "pd", incident_key(f"{queue}-{i}"),
                                          idempotency_key=f"{queue}:{queue}-{i}", cause=cause, queue=queue)

            await redrive("reports", ATTACKER)

            async def resolves_taken() -> bool:
                return int(await aredis.zcard(keys.sink_queue("pd").ready)) == 0

            assert await wait_for(resolves_taken, 30, procs)
            await wait_for(lambda: _false(), 3, procs)  # give a resolve time to be (wrongly) sent
            assert [e for e in bodies(pagerduty) if e["event_action"] == "resolve"] == [], (
                "the attacker's own redrives cannot close the payments outage")

            await redrive("payments", PAYMENTS)

            async def resolved() -> bool:
                return any(e["event_action"] == "resolve" for e in bodies(pagerduty))

            assert await wait_for(resolved, 30, procs)
            [resolve] = [e for e in bodies(pagerduty) if e["event_action"] == "resolve"]
            assert resolve["dedup_key"] == incident, "the group's incident is what closes"
        finally:
            stop(procs)


async def _false() -> bool:
    return False
