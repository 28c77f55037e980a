"""The console's JSON API against a real runtime, Redis and local sinks (docs/design.md, Console)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from bridge.app import build_console
from bridge.config.console_auth import ConsoleAuthSettings
from bridge.console.api import build_api
from bridge.console.auth import Authenticator
from bridge.core.errors import ConfigError
from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply

TOKEN = "console-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Console-User": "alice"}
FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}


@dataclass
class Rig:
    runtime: Runtime
    api: httpx.AsyncClient
    slack: Receiver
    pd: Receiver
    hook: Receiver

    async def drain(self) -> None:
        await asyncio.wait_for(self.runtime.pipeline.run(asyncio.Event(), burst=True), 30)


def console_app(runtime: Runtime) -> FastAPI:
    """The API as `create_app` mounts it, on a runtime the test drives itself (burst runs)."""
    app = FastAPI()
    app.state.console = build_console(runtime)
    app.state.console_auth = Authenticator(runtime.settings.console.token, runtime.settings.console.auth)
    app.include_router(build_api())
    return app


@asynccontextmanager
async def rig(make_settings: Callable[..., Settings], token: str | None = TOKEN,
              hook_reply: Reply | None = None, slack_group: str = "none",
              auth: ConsoleAuthSettings | None = None, env: dict[str, str] | None = None,
              **sections: Any) -> AsyncIterator[Rig]:
    slack, pd, hook = Receiver(), Receiver(default=Reply(202)), Receiver(default=hook_reply or Reply(200))
    async with serve(slack.app) as s, serve(pd.app) as p, serve(hook.app) as h:
        environ = {"DLQ_BRIDGE_CONSOLE_TOKEN": token} if token else {}
        environ.update(env or {})
        settings = make_settings(environ, **{"delivery": FAST, **sections}, console={"enabled": True}, sinks=[
            {"name": "slack", "type": "slack", "group_by": slack_group, "group_wait_s": 3600, "url": f"{s}/hook",
             "messages_per_second": 100},
            {"name": "pd", "type": "pagerduty", "group_by": "none", "routing_key": "rk",
             "events_url": f"{p}/v2/enqueue"},
            {"name": "api", "type": "webhook", "url": f"{h}/in", "secret": "x"},
        ])
        if auth is not None:
            settings = settings.model_copy(update={"console": settings.console.model_copy(update={"auth": auth})})
        async with open_runtime(settings) as runtime:
            transport = httpx.ASGITransport(app=console_app(runtime))
            async with httpx.AsyncClient(transport=transport, base_url="http://console") as api:
                yield Rig(runtime, api, slack, pd, hook)


async def test_reads_show_the_real_state(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
    async with rig(make_settings) as r:
        await r.drain()
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o2"))  # finished after o1, not beside it
        await r.drain()
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o3"))  # waiting, not yet claimed
        overview = (await r.api.get("/api/v1/overview")).json()
        page = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders", "limit": 1})).json()
        first = page["entries"][0]
        one = await r.api.get("/api/v1/entry", params={"source": "dead_letter:orders", "id": first["id"]})
        missing = await r.api.get("/api/v1/entry", params={"source": "dead_letter:orders", "id": "0" * 16})
    sources = {s["source"]: s for s in overview["sources"]}
    assert sources["dead_letter:orders"]["depth"] == 1 and sources["dead_letter:orders"]["archived"] == 2
    assert sources["dead_letter:orders"]["alerted_last_hour"] == 2
    assert sources["dead_letter:mail"]["summaries_last_hour"]["fallback"] == 1
    assert overview["gateway"]["summaries_last_hour"]["fallback"] == 3
    assert {s["name"]: s["queue_depth"] for s in overview["sinks"]} == {"slack": 0, "pd": 0, "api": 0}
    assert overview["read_only"] is False
    latest = [e["envelope"]["job_id"] for e in overview["latest"]]
    assert latest[0] == "o2" and sorted(latest[1:]) == ["m1", "o1"], "what is failing now: newest first"
    assert page["total"] == 2 and page["next_offset"] == 1
    assert first["envelope"]["job_id"] == "o2", "newest first"
    assert first["summary"]["title"] and first["summary"]["source"] == "fallback"
    assert {d["sink"]: d["state"] for d in first["deliveries"]} == {"slack": "delivered", "pd": "delivered",
                                                                    "api": "delivered"}
    assert all(d["at"] for d in first["deliveries"])
    assert one.status_code == 200 and one.json()["id"] == first["id"] and one.json()["in_archive"] is True
    assert missing.status_code == 404


async def test_actions_need_the_token(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    async with rig(make_settings) as r:
        none = await r.api.delete("/api/v1/silences/x")
        wrong = await r.api.delete("/api/v1/silences/x", headers={"Authorization": "Bearer nope"})
        right = await r.api.delete("/api/v1/silences/x", headers=AUTH)
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 403
    assert right.status_code == 409 and right.json()["message"] == "no such silence"
    async with rig(make_settings, token=None) as r:
        refused = await r.api.delete("/api/v1/silences/x", headers=AUTH)
        overview = (await r.api.get("/api/v1/overview")).json()
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
    assert overview["read_only"] is True


async def test_redrive_moves_the_job_back_resolves_and_is_audited(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1", attempts=5))
    async with rig(make_settings) as r:
        await r.drain()
        page = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()
        entry_id = page["entries"][0]["id"]
        done = await r.api.post("/api/v1/entry/redrive", params={"source": "dead_letter:orders", "id": entry_id},
                                headers=AUTH)
        again = await r.api.post("/api/v1/entry/redrive", params={"source": "dead_letter:orders", "id": entry_id},
                                 headers=AUTH)
        audit = (await r.api.get("/api/v1/audit")).json()
        after = (await r.api.get("/api/v1/entry", params={"source": "dead_letter:orders", "id": entry_id})).json()
        await r.drain()  # the sink workers send the queued resolve
    assert done.status_code == 200 and done.json()["ok"] is True
    moved = [json.loads(x) for x in await aredis.lrange("orders", 0, -1)]
    assert [(m["job_id"], m["attempts"]) for m in moved] == [("o1", 0)]
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 0
    events = [json.loads(x.body) for x in r.pd.requests]
    assert [(e["event_action"], e["dedup_key"]) for e in events] == [("trigger", "o1"), ("resolve", "o1")]
    assert len(r.slack.requests) == 1 and len(r.hook.requests) == 1, "only PagerDuty gets a resolve"
    assert again.status_code == 409
    assert [(a["who"], a["action"], a["outcome"]) for a in audit] == [("alice", "redrive", "refused"),
                                                                     ("alice", "redrive", "ok")]
    assert after["in_archive"] is False and after["redrivable"] is False


async def test_a_silence_stops_slack_and_pagerduty_but_not_webhooks_until_it_expires(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        made = await r.api.post("/api/v1/silences", headers=AUTH,
                                json={"queue": "ord*", "duration_s": 600, "reason": "deploy"})
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
        await r.drain()
        page = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()
        listed = (await r.api.get("/api/v1/silences")).json()
        expired = await r.api.delete(f"/api/v1/silences/{made.json()['id']}", headers=AUTH)
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o2"))
        await r.drain()
        metrics = r.runtime.metrics.render().decode()
    assert made.status_code == 201 and made.json()["author"] == "alice" and made.json()["active"] is True
    assert [json.loads(x.body)["text"].rsplit(" ", 1)[-1] for x in r.slack.requests] == ["m1)", "o2)"]
    assert sorted(json.loads(x.body)["job_id"] for x in r.hook.requests) == ["m1", "o1", "o2"]
    assert sorted(json.loads(x.body)["payload"]["custom_details"]["job_id"] for x in r.pd.requests) == ["m1", "o2"]
    states = {d["sink"]: (d["state"], d["silence_id"]) for d in page["entries"][0]["deliveries"]}
    assert states["slack"] == ("silenced", made.json()["id"]) and states["pd"][0] == "silenced"
    assert states["api"][0] == "delivered"
    assert [s["id"] for s in listed] == [made.json()["id"]]
    assert expired.status_code == 200
    assert 'dlq_bridge_silenced_total{sink="slack"} 1.0' in metrics


async def test_retry_and_discard_undeliverable(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    async with rig(make_settings, hook_reply=Reply(410)) as r:
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"), envelope_entry(job_id="o2"))
        await r.drain()
        records = (await r.api.get("/api/v1/undeliverable")).json()
        entry = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()["entries"][0]
        r.hook.default = Reply(200)
        retried = await r.api.post(f"/api/v1/undeliverable/{records[0]['id']}/retry", headers=AUTH)
        discarded = await r.api.delete(f"/api/v1/undeliverable/{records[1]['id']}", headers=AUTH)
        left = (await r.api.get("/api/v1/undeliverable")).json()
        audit = [(a["action"], a["outcome"]) for a in (await r.api.get("/api/v1/audit")).json()]
    assert [x["sink"] for x in records] == ["api", "api"] and all(x["retryable"] for x in records)
    assert {d["sink"]: d["state"] for d in entry["deliveries"]}["api"] == "undeliverable"
    assert retried.status_code == 200 and retried.json()["ok"] is True
    assert [json.loads(x.body)["job_id"] for x in r.hook.requests][-1] == records[0]["job_id"]
    assert discarded.status_code == 200 and left == []
    assert audit == [("discard", "ok"), ("retry", "ok")]


async def test_silence_needs_a_matcher_and_a_future_end(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        bare = await r.api.post("/api/v1/silences", headers=AUTH, json={"duration_s": 60})
        past = await r.api.post("/api/v1/silences", headers=AUTH, json={"job_name": "x", "ends_at": 1.0})
    assert bare.status_code == 400 and "at least one" in bare.json()["detail"]
    assert past.status_code == 400


async def test_groups_respect_silences_show_members_and_redrive_whole(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings, slack_group="fingerprint") as r:
        await r.api.post("/api/v1/silences", headers=AUTH, json={"queue": "mail", "duration_s": 600})
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"), envelope_entry(job_id="o2"))
        await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
        await r.drain()
        groups = (await r.api.get("/api/v1/groups")).json()
        group = (await r.api.get("/api/v1/group", params={"sink": "slack", "key": groups[0]["group_key"]})).json()
        entry = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()["entries"][0]
        overview = (await r.api.get("/api/v1/overview")).json()
        done = await r.api.post("/api/v1/group/redrive", headers=AUTH,
                                params={"sink": "slack", "key": groups[0]["group_key"]})
        gone = await r.api.get("/api/v1/group", params={"sink": "slack", "key": "fp:nope"})
    assert [(g["sink"], g["count"], g["queues"]) for g in groups] == [("slack", 2, {"orders": 2})], \
        "the silenced mail job joined no group"
    assert [json.loads(c.body)["text"].count("2 jobs failed") for c in r.slack.requests] == [1], \
        "the drain ended with the group's digest sent, not waiting out group_wait"
    assert sorted(j["job_id"] for j in group["jobs"]) == ["o1", "o2"] and group["notified"] == 2
    assert all(j["source"] == "dead_letter:orders" and j["notified"] for j in group["jobs"])
    assert {d["sink"]: d["state"] for d in entry["deliveries"]}["slack"] == "delivered"
    assert overview["groups"] == groups and {s["name"]: s["open_groups"] for s in overview["sinks"]}["slack"] == 1
    assert done.status_code == 200 and done.json()["count"] == 2
    assert sorted(json.loads(x)["job_id"] for x in await aredis.lrange("orders", 0, -1)) == ["o1", "o2"]
    assert gone.status_code == 404


async def test_who_comes_from_the_body_then_the_header_and_is_cleaned(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        by_body = await r.api.post("/api/v1/silences", headers=AUTH,
                                   json={"job_name": "x", "duration_s": 60, "author": "bob\u200b\x07"})
        by_token = await r.api.post("/api/v1/silences", headers={"Authorization": f"Bearer {TOKEN}"},
                                    json={"job_name": "y", "duration_s": 60})
        audit = (await r.api.get("/api/v1/audit")).json()
    assert by_body.status_code == 201, by_body.text
    assert by_token.status_code == 201, by_token.text
    assert by_body.json()["author"] == "bob" and by_token.json()["author"] == "token"
    assert [a["who"] for a in audit] == ["token", "bob"]


def test_the_console_token_is_optional_unless_a_variable_is_named(make_settings: Callable[..., Settings]) -> None:
    assert make_settings(console={"enabled": True}).console.token is None, "default variable unset: read-only"
    given = make_settings({"DLQ_BRIDGE_CONSOLE_TOKEN": "t"}, console={"enabled": True}).console.token
    assert given is not None and given.get_secret_value() == "t"
    with pytest.raises(ConfigError, match="CONSOLE_TOKEN_OF_OURS"):
        make_settings(console={"enabled": True, "token_env": "CONSOLE_TOKEN_OF_OURS"})


async def test_the_overview_warns_when_an_archive_or_the_undeliverable_list_drops_dead_letters(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=f"o{i}") for i in range(4)])
    await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1"))
    async with rig(make_settings, hook_reply=Reply(410), sources={"archive_max": 3},
                   delivery={**FAST, "undeliverable_max": 4}) as r:
        await r.drain()
        overview = (await r.api.get("/api/v1/overview")).json()
        metrics = r.runtime.metrics.render().decode()
    notes = {n["store"]: (n["count"], n["cap"], n["setting"]) for n in overview["retention"]}
    assert notes == {"archive of dead_letter:orders": (3, 3, "[sources] archive_max"),
                     "undeliverable list": (4, 4, "[delivery] undeliverable_max")}, "mail (1 of 3) is not near its cap"
    trimmed = {n["store"]: n["trimmed_last_hour"] for n in overview["retention"]}
    assert trimmed["archive of dead_letter:orders"] == 1, "4 alerted into an archive of 3: the oldest dropped, counted"
    assert 'dlq_bridge_archive_trimmed_total{source="dead_letter:orders"} 1.0' in metrics
    assert 'dlq_bridge_archive_trimmed_total{source="dead_letter:mail"}' not in metrics


async def test_the_overview_shows_the_memory_plan_for_the_last_hours_rate(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", *(envelope_entry(job_id=f"o{i}") for i in range(36)))
    async with rig(make_settings) as r:
        await r.drain()
        plan = (await r.api.get("/api/v1/overview")).json()["memory_plan"]
    assert plan["per_second"] == pytest.approx(36 * 24 / 86_400) and plan["days"] == 30
    assert plan["projected_bytes"] > 36 * 24 * 30 * 142, "the webhook's ledger alone, a day of keys"
    assert plan["largest"].startswith("archive, records and search index")
    assert plan["maxmemory_bytes"] == 0 and plan["warn"] is False, "the suite's Redis has no maxmemory"


async def test_the_overview_counts_the_models_tokens_per_day_fleet_wide(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    gateway = FakeGateway(usage={"prompt_tokens": 1234, "completion_tokens": 99, "total_tokens": 1333})
    for job, error in (("t1", "TimeoutError: warehouse API timed out"), ("t2", "KeyError: 'sku'")):
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id=job, last_error=error))
    async with serve(gateway.app()) as gw, rig(
        make_settings, env={"OPENCLAW_GATEWAY_TOKEN": "gw-token"}, openclaw={"url": gw, "timeout_s": 5}
    ) as r:
        await r.drain()
        deadline = asyncio.get_running_loop().time() + 10  # the counts are written within FLUSH_S (2 s)
        while True:
            overview = (await r.api.get("/api/v1/overview")).json()
            today = overview["gateway"]["tokens_per_day"][0]
            if today["calls"] or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
    assert gateway.calls == 2
    assert today["calls"] == 2 and today["prompt_tokens"] == 2468 and today["completion_tokens"] == 198
    assert today["estimated_calls"] == 0 and len(overview["gateway"]["tokens_per_day"]) == 7
