"""Bulk actions on a search snapshot through the real API, runtime and Redis (bridge/console/bulk.py).

A page's `snapshot` fixes the set: entries handed off after it are never touched. The count
comes first (for the confirmation), then batches with progress, a cancel, the audit records,
the roles, and a run repeated after an interrupted one (no double redrive).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from bridge.console import bulk as bulk_module
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.test_console_api import AUTH, rig
from tests.test_console_roles import ROLE_TOKENS, bearer

ARCHIVE = keys.alerted("dead_letter:orders")


async def _snapshot(api: httpx.AsyncClient, **params: Any) -> tuple[str, list[str]]:
    page = (await api.get("/api/v1/search", params={**params, "limit": 100})).json()
    return str(page["snapshot"]), [e["envelope"]["job_id"] for e in page["entries"]]


async def _park(r: Any, aredis: aioredis.Redis, jobs: list[str], **fields: Any) -> None:
    await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=j, **fields) for j in jobs])
    await r.drain()


async def _work_queue(aredis: aioredis.Redis) -> list[str]:
    return sorted(json.loads(x)["job_id"] for x in await aredis.lrange("orders", 0, -1))


async def test_a_bulk_redrive_moves_exactly_the_snapshot_in_batches_resolves_and_is_audited(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    seen = [f"t{i}" for i in range(7)]
    async with rig(make_settings) as r:
        await _park(r, aredis, seen)
        await _park(r, aredis, ["k1"], last_error="KeyError: 'sku'")  # another cause: not in the filter
        as_of, shown = await _snapshot(r.api, error="TimeoutError")
        await _park(r, aredis, ["late1", "late2"])  # arrive after the page was rendered: same filter
        made = await r.api.post("/api/v1/bulk", headers=AUTH,
                                json={"action": "redrive", "filter": {"error": "TimeoutError", "as_of": as_of}})
        bulk = made.json()
        progress = []
        for _ in range(5):
            step = await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", params={"batch": 3}, headers=AUTH)
            progress.append((step.json()["processed"], step.json()["state"]))
            if step.json()["state"] == "done":
                break
        again = (await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", headers=AUTH)).json()
        shown_later = (await r.api.get(f"/api/v1/bulk/{bulk['id']}")).json()
        audit = (await r.api.get("/api/v1/audit")).json()
        await r.drain()  # the sink workers send the queued resolves
    assert sorted(shown) == seen
    assert made.status_code == 201 and bulk["total"] == 7 and bulk["state"] == "ready", "the count, before acting"
    assert progress == [(3, "running"), (6, "running"), (7, "done")]
    assert await _work_queue(aredis) == seen, "every job of the snapshot once, no late arrival"
    assert sorted(json.loads(x)["job_id"] for x in await aredis.lrange(ARCHIVE, 0, -1)) == ["k1", "late1", "late2"]
    assert again["state"] == "done" and again["done"] == 7 and shown_later == again, "a done bulk does nothing more"
    resolves = sorted(e["dedup_key"] for e in (json.loads(x.body) for x in r.pd.requests)
                      if e["event_action"] == "resolve")
    assert resolves == seen, "each redriven job's PagerDuty page is resolved, as a single redrive does"
    bulk_audit = [(a["who"], a["action"], a["outcome"], a["detail"]) for a in audit if a["action"] == "bulk-redrive"]
    assert bulk_audit == [
        ("alice", "bulk-redrive", "ok", "7 of 7 entries redriven, 0 skipped (gone from the archive or parked again "
                                       "after the snapshot); 7 processed"),
        ("alice", "bulk-redrive", "started", "7 entries in the snapshot"),
    ]
    assert f"as_of={as_of}" in audit[0]["target"] and "error=TimeoutError" in audit[0]["target"]


async def test_cancel_stops_between_batches_and_is_audited_with_the_count(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings) as r:
        await _park(r, aredis, [f"c{i}" for i in range(6)])
        as_of, _ = await _snapshot(r.api)
        bulk = (await r.api.post("/api/v1/bulk", headers=AUTH,
                                 json={"action": "redrive", "filter": {"as_of": as_of}})).json()
        first = (await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", params={"batch": 2}, headers=AUTH)).json()
        cancelled = (await r.api.post(f"/api/v1/bulk/{bulk['id']}/cancel", headers=AUTH)).json()
        after = (await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", params={"batch": 2}, headers=AUTH)).json()
        audit = (await r.api.get("/api/v1/audit")).json()
    assert (first["processed"], cancelled["state"], after["state"], after["processed"]) == (2, "cancelled",
                                                                                         "cancelled", 2)
    assert len(await _work_queue(aredis)) == 2 and await aredis.llen(ARCHIVE) == 4
    assert (audit[0]["action"], audit[0]["outcome"]) == ("bulk-redrive", "cancelled")
    assert audit[0]["detail"].startswith("2 of 6 entries redriven")


async def test_a_run_repeated_after_an_interrupted_one_redrives_nothing_twice(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies after the batch's moves and before its progress is written (the worst
    point): the retried batch finds those entries gone and counts them as done; an entry parked
    again with the same bytes after the snapshot is left alone."""
    async with rig(make_settings) as r:
        await _park(r, aredis, [f"x{i}" for i in range(5)])
        as_of, _ = await _snapshot(r.api)
        bulk = (await r.api.post("/api/v1/bulk", headers=AUTH,
                                 json={"action": "redrive", "filter": {"as_of": as_of}})).json()
        real_do = bulk_module.BulkActions._do

        async def crash_after_moves(self: Any, *args: Any) -> Any:
            await real_do(self, *args)
            raise RuntimeError("killed after the moves, before the progress write")

        monkeypatch.setattr(bulk_module.BulkActions, "_do", crash_after_moves)
        with pytest.raises(RuntimeError):
            await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", params={"batch": 3}, headers=AUTH)
        monkeypatch.setattr(bulk_module.BulkActions, "_do", real_do)
        moved_by_crashed = await _work_queue(aredis)
        # one of them fails again and is parked with the very same bytes after the snapshot
        again = moved_by_crashed[0]
        raw = next(x for x in await aredis.lrange("orders", 0, -1) if json.loads(x)["job_id"] == again)
        await aredis.lrem("orders", 1, raw)
        await _park(r, aredis, [again])
        views = []
        for _ in range(3):
            views.append((await r.api.post(f"/api/v1/bulk/{bulk['id']}/run", params={"batch": 3},
                                           headers=AUTH)).json())
    assert len(moved_by_crashed) == 3
    final = views[-1]
    assert (final["state"], final["processed"], final["done"], final["skipped"]) == ("done", 5, 4, 1)
    queue = await _work_queue(aredis)
    assert sorted(queue) == sorted(set(queue)), "no job twice on the work queue"
    assert set(queue) == {f"x{i}" for i in range(5)} - {again}, "parked again after the snapshot: stays archived"
    assert [json.loads(x)["job_id"] for x in await aredis.lrange(ARCHIVE, 0, -1)] == [again]


async def test_bulk_roles_discard_and_silence_the_cause(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings, auth=ROLE_TOKENS) as r:
        await _park(r, aredis, ["d1", "d2"])
        await _park(r, aredis, ["d3"], last_error="KeyError: 'sku'")
        as_of, _ = await _snapshot(r.api)
        everything = {"as_of": as_of}
        viewer = await r.api.post("/api/v1/bulk", headers=bearer("viewer-token"),
                                  json={"action": "redrive", "filter": everything})
        operator_discard = await r.api.post("/api/v1/bulk", headers=bearer("operator-token"),
                                            json={"action": "discard", "filter": everything})
        no_snapshot = await r.api.post("/api/v1/bulk", headers=bearer("admin-token"),
                                       json={"action": "discard", "filter": {}})
        silence = (await r.api.post("/api/v1/bulk", headers=bearer("operator-token"),
                                    json={"action": "silence", "filter": everything, "duration_s": 600})).json()
        viewer_run = await r.api.post(f"/api/v1/bulk/{silence['id']}/run", headers=bearer("viewer-token"))
        silenced = (await r.api.post(f"/api/v1/bulk/{silence['id']}/run", headers=bearer("operator-token"))).json()
        silences = (await r.api.get("/api/v1/silences")).json()
        discard = (await r.api.post("/api/v1/bulk", headers=bearer("admin-token"),
                                    json={"action": "discard", "filter": {**everything, "job": "ship_order"}})).json()
        discarded = (await r.api.post(f"/api/v1/bulk/{discard['id']}/run", headers=bearer("admin-token"))).json()
        progress = await r.api.get(f"/api/v1/bulk/{discard['id']}", headers=bearer("viewer-token"))
        unknown = await r.api.get("/api/v1/bulk/nope", headers=bearer("viewer-token"))
    assert viewer.status_code == 403 and viewer.json()["detail"] == "this needs the operator role (you have viewer)"
    assert operator_discard.status_code == 403
    assert operator_discard.json()["detail"] == "this needs the admin role (you have operator)"
    assert no_snapshot.status_code == 409 and "as_of" in no_snapshot.json()["detail"]
    assert viewer_run.status_code == 403
    assert (silence["total"], silenced["done"], silenced["state"]) == (2, 2, "done"), "one silence per cause"
    assert len(silences) == 2 and {s["author"] for s in silences} == {"otto"}
    assert (discard["total"], discarded["done"]) == (3, 3) and await aredis.llen(ARCHIVE) == 0
    assert await aredis.llen("orders") == 0, "a discard moves nothing back"
    assert progress.status_code == 200 and unknown.status_code == 404


async def test_chosen_entries_are_redriven_and_only_they(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """A compact table's ticked rows: only they move, in one audited bulk action; a selection is bounded."""
    async with rig(make_settings) as r:
        await _park(r, aredis, ["c1", "c2", "c3", "c4"])
        page = (await r.api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()
        ids = {e["envelope"]["job_id"]: e["id"] for e in page["entries"]}
        as_of = (await r.api.get("/api/v1/search", params={"source": "dead_letter:orders"})).json()["snapshot"]
        chosen = [{"source": "dead_letter:orders", "id": ids[j]} for j in ("c1", "c3")]
        made = await r.api.post("/api/v1/bulk", headers=AUTH,
                                json={"action": "redrive", "filter": {"as_of": as_of}, "entries": chosen})
        done = (await r.api.post(f"/api/v1/bulk/{made.json()['id']}/run", headers=AUTH)).json()
        too_many = await r.api.post("/api/v1/bulk", headers=AUTH, json={
            "action": "redrive", "filter": {"as_of": as_of}, "entries": chosen * (bulk_module.SELECT_MAX // 2 + 1)})
        audit = (await r.api.get("/api/v1/audit")).json()
    assert made.status_code == 201 and made.json()["total"] == 2 and made.json()["filter"] == "2 chosen entries"
    assert (done["state"], done["done"], done["skipped"]) == ("done", 2, 0)
    assert await _work_queue(aredis) == ["c1", "c3"], "exactly the ticked entries"
    assert sorted(json.loads(x)["job_id"] for x in await aredis.lrange(ARCHIVE, 0, -1)) == ["c2", "c4"]
    assert too_many.status_code == 422, "a selection is bounded (SELECT_MAX)"
    assert audit[0]["action"] == "bulk-redrive" and audit[0]["target"].endswith(": 2 chosen entries")
