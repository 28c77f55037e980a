"""The console's cause groups (issue 25, docs/design.md 5d): named by their cause, listed with their
queues, and redriven whole, each job into its own DLQ's work queue (confirmed, audited)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from bridge.app import build_console
from bridge.console import fleet
from bridge.console.auth import Authenticator
from bridge.console.pages import pages_router
from bridge.settings import Settings
from tests.conftest import envelope_entry
from tests.test_console_api import AUTH, rig

DOWN = "ConnectionRefusedError: postgres-primary:5432 refused connection (order {i})"


async def test_a_cause_group_names_its_cause_lists_its_queues_and_redrives_each_job_home(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet, "MEMBERS_MAX", 2)  # the page lists 2 members; the redrive takes all 4
    async with rig(make_settings, slack_group="cause") as r:
        for queue, n in (("orders", 2), ("billing", 1), ("search", 1)):
            await aredis.lpush(f"dead_letter:{queue}", *(envelope_entry(queue=queue, job_id=f"{queue}-{i}",
                                                                         last_error=DOWN.format(i=i))
                                                         for i in range(n)))
        await r.drain()
        [group] = (await r.api.get("/api/v1/groups")).json()
        shown = (await r.api.get("/api/v1/group", params={"sink": "slack", "key": group["group_key"]})).json()
        pages = FastAPI()
        auth = Authenticator(r.runtime.settings.console.token, r.runtime.settings.console.auth)
        pages.include_router(pages_router(lambda: build_console(r.runtime).service, None, auth))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=pages), base_url="http://console") as web:
            page = await web.get("/console/group", params={"sink": "slack", "key": group["group_key"]},
                                 headers=AUTH)
        done = await r.api.post("/api/v1/group/redrive", headers=AUTH,
                                params={"sink": "slack", "key": group["group_key"]})
        audit = (await r.api.get("/api/v1/audit")).json()
    assert group["title"] == "postgres-primary:5432 unreachable — 3 queues"
    assert group["queues"] == {"orders": 2, "billing": 1, "search": 1}
    assert len(shown["jobs"]) == 2 and shown["jobs_total"] == 4
    assert page.status_code == 200, page.text[:300]
    assert "postgres-primary:5432 unreachable — 3 queues" in page.text
    assert 'data-confirm="Redrive all 4 jobs?"' in page.text, "the whole-cause redrive asks first"
    assert done.status_code == 200 and done.json()["count"] == 4, done.json()
    assert done.json()["message"] == "4 of 4 jobs moved back to their work queue; resolves queued for pd"
    for queue, ids in (("orders", ["orders-0", "orders-1"]), ("billing", ["billing-0"]), ("search", ["search-0"])):
        assert sorted(json.loads(x)["job_id"] for x in await aredis.lrange(queue, 0, -1)) == ids
    assert any(a["action"] == "redrive-group" and a["who"] == "alice" for a in audit), audit
