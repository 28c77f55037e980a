"""The history of an entry through the real API, runtime and Redis (bridge/console/history.py): every time
the same job was parked again after a redrive (attempts, error, when), who acted, what each sink did."""

from __future__ import annotations

from collections.abc import Callable

import redis.asyncio as aioredis

from bridge.settings import Settings
from tests.conftest import envelope_entry
from tests.test_console_api import AUTH, rig


async def test_a_job_parked_again_after_redrives_shows_each_time_who_acted_and_each_sink(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1", attempts=3))
        await r.drain()
        first = (await r.api.get("/api/v1/search", params={"job": "ship_order"})).json()["entries"][0]["id"]
        redrive = await r.api.post("/api/v1/entry/redrive", params={"source": "dead_letter:orders", "id": first},
                                   headers=AUTH)  # alice
        await aredis.rpop("orders")  # the worker takes it and fails again
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1", attempts=5, last_error="KeyError: 'sku'"))
        await r.drain()
        page = (await r.api.get("/api/v1/search", params={"error": "KeyError"})).json()
        bulk = (await r.api.post("/api/v1/bulk", headers={**AUTH, "X-Console-User": "bob"}, json={
            "action": "redrive", "filter": {"error": "KeyError", "as_of": page["snapshot"]}})).json()
        ran = await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", headers={**AUTH, "X-Console-User": "bob"})
        await aredis.rpop("orders")
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1", attempts=2, last_error="ValueError: x"))
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="other", attempts=1))
        await r.drain()
        newest = (await r.api.get("/api/v1/search", params={"error": "ValueError"})).json()["entries"][0]["id"]
        history = (await r.api.get("/api/v1/entry/history", params={"source": "dead_letter:orders", "id": newest}))
        from_oldest = (await r.api.get("/api/v1/entry/history", params={"source": "dead_letter:orders", "id": first}))
        unknown = await r.api.get("/api/v1/entry/history", params={"source": "dead_letter:orders", "id": "0" * 16})
    assert redrive.status_code == 200 and ran.json()["done"] == 1
    items = history.json()
    rows = [(h["entry"]["envelope"]["attempts"], h["entry"]["envelope"]["last_error"],
             [(a["who"], a["action"]) for a in h["acted"]]) for h in items]
    assert rows == [
        (2, "ValueError: x", []),
        (5, "KeyError: 'sku'", [("bob", "bulk-redrive")]),
        (3, "TimeoutError: warehouse API timed out after 30s", [("alice", "redrive")]),
    ], "newest first; the other job is not part of it"
    times = [h["entry"]["archived_at"] for h in items]
    assert times == sorted(times, reverse=True) and all(t is not None for t in times)
    for h in items:  # what each sink did each time
        assert sorted(d["sink"] for d in h["entry"]["deliveries"]) == ["api", "pd", "slack"]
        assert {d["state"] for d in h["entry"]["deliveries"]} <= {"delivered", "pending", "duplicate"}
    assert [h["entry"]["in_archive"] for h in items] == [False, False, False], "history reads records, not bytes"
    assert from_oldest.json() == items
    assert unknown.status_code == 404
