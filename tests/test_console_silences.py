"""The console's silences API with matchers: preview, create, what the sinks then get, edit, extend, comment."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis.asyncio as aioredis

from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.test_console_api import AUTH, rig

SEVERITY = {"default": "critical", "emails": "warning"}
WARNINGS_OF_EMAILS = [("matcher", "queue=emails"), ("matcher", 'severity=~"warn.*"')]


def slack_jobs(requests: list[object]) -> list[str]:
    return [json.loads(x.body)["text"].rsplit(" ", 1)[-1].rstrip(")") for x in requests]  # type: ignore[attr-defined]


async def test_preview_then_silence_one_queue_s_warnings(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings, severity=SEVERITY) as r:
        await aredis.lpush("dead_letter:emails", envelope_entry(queue="emails", job_id="e1"))
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        await r.drain()
        preview = (await r.api.get("/api/v1/silences/preview", params=WARNINGS_OF_EMAILS)).json()
        loud = await r.api.get("/api/v1/silences/preview", params=[*WARNINGS_OF_EMAILS, ("webhooks", "true")])
        bad = await r.api.get("/api/v1/silences/preview", params=[("matcher", "queue=~(")])
        everything = await r.api.get("/api/v1/silences/preview", params=[("matcher", "queue=~.*")])
        made = await r.api.post(
            "/api/v1/silences",
            headers=AUTH,
            json={
                "label_matchers": [
                    {"name": "queue", "op": "=", "value": "emails"},
                    {"name": "severity", "op": "=~", "value": "warn.*"},
                ],
                "duration_s": 3600,
                "reason": "SMTP relay maintenance",
            },
        )
        await aredis.lpush("dead_letter:emails", envelope_entry(queue="emails", job_id="e2"))
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o2"))
        await r.drain()
        stored = json.loads(await aredis.hget(keys.SILENCES, made.json()["id"]))
    assert [(e["queue"], e["severity"], e["sinks"]) for e in preview["entries"]] == [
        ("emails", "warning", ["slack", "pd"])
    ]
    assert (preview["entries_matched"], preview["scanned"], preview["complete"]) == (1, 2, True)
    assert loud.json()["entries"][0]["sinks"] == ["slack", "pd", "api"]
    assert bad.status_code == 400 and "RE2" in bad.json()["detail"]
    assert everything.status_code == 400 and "empty string" in everything.json()["detail"]
    assert made.status_code == 201
    view = made.json()
    assert [(m["name"], m["op"], m["value"]) for m in view["label_matchers"]] == [
        ("queue", "=", "emails"),
        ("severity", "=~", "warn.*"),
    ]
    assert (view["author"], view["reason"], view["state"]) == ("alice", "SMTP relay maintenance", "active")
    assert stored["queue"] is None and stored["fingerprint"] is None, "0.2.0 must not read it as all of emails"
    assert sorted(slack_jobs(r.slack.requests)) == ["e1", "o1", "o2"], "e2 (a warning of emails) held back"
    assert sorted(json.loads(x.body)["job_id"] for x in r.hook.requests) == ["e1", "e2", "o1", "o2"]


async def test_the_preview_names_the_open_groups_it_would_hold_back(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings, slack_group="queue", severity=SEVERITY) as r:
        await aredis.lpush("dead_letter:emails", envelope_entry(queue="emails", job_id="e1"))
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        await r.drain()
        mine = (await r.api.get("/api/v1/silences/preview", params=WARNINGS_OF_EMAILS)).json()
        job = (
            await r.api.get(
                "/api/v1/silences/preview", params=[("matcher", "job_name=ship_order"), ("matcher", "sink!=pd")]
            )
        ).json()
    assert [(g["sink"], g["group_key"], g["count"]) for g in mine["groups"]] == [("slack", "queue:emails", 1)]
    assert sorted(g["group_key"] for g in job["groups"]) == ["queue:emails", "queue:orders"]
    assert sorted(e["queue"] for e in job["entries"]) == ["emails", "orders"]
    assert all(e["sinks"] == ["slack"] for e in job["entries"])


async def test_extend_keeps_the_id_new_matchers_replace_it_and_comments_keep_their_author(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        made = (
            await r.api.post(
                "/api/v1/silences",
                headers=AUTH,
                json={"label_matchers": [{"name": "queue", "value": "emails"}], "duration_s": 600},
            )
        ).json()
        sid = made["id"]
        extended = await r.api.patch(f"/api/v1/silences/{sid}", headers=AUTH, json={"duration_s": 7200})
        noted = await r.api.post(
            f"/api/v1/silences/{sid}/comments",
            headers={**AUTH, "X-Console-User": "bob"},
            json={"text": "relay back at 18:00"},
        )
        edited = await r.api.patch(
            f"/api/v1/silences/{sid}",
            headers=AUTH,
            json={"label_matchers": [{"name": "queue", "op": "=~", "value": "emails|reports"}]},
        )
        old = (await r.api.get(f"/api/v1/silences/{sid}")).json()
        past = await r.api.patch(f"/api/v1/silences/{sid}", headers=AUTH, json={"ends_at": 1.0})
        missing = await r.api.patch("/api/v1/silences/nope", headers=AUTH, json={"duration_s": 60})
        active = [s["id"] for s in (await r.api.get("/api/v1/silences")).json()]
        audit = [(a["action"], a["who"]) for a in (await r.api.get("/api/v1/audit")).json()]
    assert extended.status_code == 200 and extended.json()["id"] == sid
    assert extended.json()["ends_at"] - made["ends_at"] > 6000
    assert noted.status_code == 201
    assert [(c["author"], c["text"]) for c in noted.json()["comments"]] == [("bob", "relay back at 18:00")]
    new = edited.json()
    assert edited.status_code == 200 and new["id"] != sid and new["replaces"] == sid
    assert new["label_matchers"] == [{"name": "queue", "op": "=~", "value": "emails|reports"}]
    assert (old["state"], old["replaced_by"], old["expired_by"]) == ("expired", new["id"], "alice")
    assert past.status_code == 400 and missing.status_code == 404
    assert active == [new["id"]]
    assert audit[:3] == [("edit-silence", "alice"), ("comment-silence", "bob"), ("edit-silence", "alice")]
