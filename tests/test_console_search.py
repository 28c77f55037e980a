"""Console search through the real API, runtime and Redis (docs/design.md, "Console search")."""

from __future__ import annotations

import csv
import io
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.console import search as search_module
from bridge.console.export import inert
from bridge.settings import Settings
from bridge.stores.search_index import SearchIndex
from tests.conftest import envelope_entry
from tests.support.receiver import Reply
from tests.test_console_api import rig


async def _search(api: Any, **params: Any) -> dict[str, Any]:
    reply = await api.get("/api/v1/search", params=params)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _jobs(page: dict[str, Any]) -> list[str]:
    return [e["envelope"]["job_id"] for e in page["entries"]]


async def test_each_filter_finds_exactly_its_entries_newest_first(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    async with rig(make_settings, hook_reply=Reply(410)) as r:
        await r.drain()
        await aredis.lpush("dead_letter:orders", envelope_entry(
            job_id="o2", last_error="KeyError: 'sku' missing from cart 91", payload_excerpt='{"cart": "blue-widget"}'))
        await r.drain()
        await aredis.lpush("dead_letter:mail", envelope_entry(queue="mail", job_id="m1", job_name="send_mail",
                                                              last_error="SMTPError: 550 mailbox unavailable "
                                                                         "password=hunter2"))
        await r.drain()
        every = await _search(r.api, text="")
        by_error = await _search(r.api, error="TimeoutError")
        by_job = await _search(r.api, job="send_mail")
        by_text = await _search(r.api, text="BLUE-widget")
        two_words = await _search(r.api, text="sku cart")
        secret = await _search(r.api, text="hunter2")
        by_queue = await _search(r.api, queue="ma*")
        by_source = await _search(r.api, source="dead_letter:ord*")
        by_kind = await _search(r.api, kind="sidekiq")
        by_summary = await _search(r.api, summary="fallback", limit=100)
        fp = by_job["entries"][0]["envelope"]["fingerprint"]
        by_fp = await _search(r.api, fp=fp)
        by_state = await _search(r.api, state="undeliverable")
        newest = every["entries"][0]["archived_at"]
        since = await _search(r.api, since=newest - 0.0005)
        until = await _search(r.api, until=newest - 0.0005)
        bad = await r.api.get("/api/v1/search", params={"state": "exploded"})
    assert _jobs(every) == ["m1", "o2", "o1"], "newest first, every source"
    assert _jobs(by_error) == ["o1"] and _jobs(by_job) == ["m1"]
    assert _jobs(by_text) == ["o2"] and _jobs(two_words) == ["o2"]
    assert _jobs(secret) == [], "the search sees only the redacted text"
    assert "hunter2" not in json.dumps(by_job)
    assert _jobs(by_queue) == ["m1"] and _jobs(by_source) == ["o2", "o1"] and _jobs(by_kind) == []
    assert _jobs(by_summary) == ["m1", "o2", "o1"]
    assert _jobs(by_fp) == ["m1"]
    assert _jobs(by_state) == ["m1", "o2", "o1"], "the webhook refused them all for good"
    assert _jobs(since) == ["m1"] and _jobs(until) == ["o2", "o1"]
    assert bad.status_code == 422


async def test_pages_follow_the_cursor_and_ignore_entries_that_arrive_meanwhile(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=f"o{i}") for i in range(7)])
    async with rig(make_settings) as r:
        await r.drain()
        first = await _search(r.api, error="TimeoutError", limit=3)
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="late"))
        await r.drain()
        pages = [first]
        while pages[-1]["next_before"]:
            pages.append(await _search(r.api, error="TimeoutError", limit=3, before=pages[-1]["next_before"]))
    seen = [job for page in pages for job in _jobs(page)]
    assert len(seen) == 7 and set(seen) == {f"o{i}" for i in range(7)}, "every entry once, none twice"
    assert "late" not in seen and len(pages) == 3
    assert all(page["complete"] for page in pages)


async def test_a_rare_delivery_state_stops_at_the_time_budget_and_the_cursor_goes_on(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each candidate of a state filter costs its delivery lookups: a page checks rounds for at most
    TIME_BUDGET_S (here 0: one round), says it is incomplete, and its cursor continues."""
    monkeypatch.setattr(search_module, "TIME_BUDGET_S", 0.0)
    await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=f"o{i}") for i in range(20)])
    async with rig(make_settings) as r:
        await r.drain()
        pages = [await _search(r.api, state="undeliverable", limit=1)]
        while pages[-1]["next_before"]:
            pages.append(await _search(r.api, state="undeliverable", limit=1, before=pages[-1]["next_before"]))
        pinned = await _search(r.api, limit=1, as_of=(await _search(r.api, limit=1))["snapshot"])
    assert len(pages) >= 4 and sum(p["scanned"] for p in pages) == 20, "one round a page, every entry once"
    assert [p["complete"] for p in pages] == [False] * (len(pages) - 1) + [True]
    assert all(not p["entries"] for p in pages)
    assert pinned["snapshot"] == pinned["filter"]["as_of"] and len(pinned["entries"]) == 1


async def test_export_streams_redacted_inert_rows_up_to_the_limit_and_is_audited(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    hostile = '=HYPERLINK("https://evil.example","x")'
    await aredis.lpush("dead_letter:orders", *[envelope_entry(job_id=f"o{i}") for i in range(4)],
                       envelope_entry(job_id="f1", job_name=hostile, last_error="-2+3 @cmd password=hunter2",
                                      payload_excerpt="<script>alert(1)</script>"))
    async with rig(make_settings) as r:
        await r.drain()
        csv_reply = await r.api.get("/api/v1/export", params={"format": "csv", "rows": 3},
                                    headers={"X-Console-User": "eve"})
        json_reply = await r.api.get("/api/v1/export", params={"format": "json", "job": hostile})
        too_many = await r.api.get("/api/v1/export", params={"rows": 10**6})
        audit = (await r.api.get("/api/v1/audit")).json()
    rows = list(csv.reader(io.StringIO(csv_reply.text)))
    assert csv_reply.headers["content-type"].startswith("text/csv")
    assert "attachment" in csv_reply.headers["content-disposition"]
    assert rows[0][:4] == ["archived_at", "source", "queue", "job_id"] and len(rows) == 1 + 3, "the row limit holds"
    exported = json.loads(json_reply.text)
    assert [e["envelope"]["job_id"] for e in exported] == ["f1"]
    assert "hunter2" not in csv_reply.text + json_reply.text, "exports carry the redacted text only"
    cells = {cell for row in rows[1:] for cell in row}
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")], "no cell a spreadsheet would evaluate"
    assert too_many.status_code == 422
    exports = [(a["action"], a["target"], a["detail"]) for a in audit if a["action"] == "export"]
    assert ("export", f"job={urllib.parse.quote_plus(hostile)}", "1 rows as json") in exports
    assert ("export", "everything", "3 rows as csv") in exports


def test_a_formula_cell_is_made_inert() -> None:
    assert [inert(v) for v in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "plain", None, 3)] == [
        "'=1+1", "'+1", "'-1", "'@SUM(A1)", "'\t=1", "plain", "", "3"]


async def test_the_index_is_trimmed_to_the_kept_records_without_anyone_searching(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    """Searched once, then 40 more entries with new words: the upkeep's trim alone drops the index
    of every record the hand-off trimmed (issue 39: the index used to keep them until someone searched)."""
    keep = 5
    await aredis.lpush("dead_letter:orders", *(envelope_entry(job_id=f"old{i}", last_error=f"Boom: oldword{i} failed")
                                                for i in range(keep)))
    async with rig(make_settings, sources={"archive_max": keep}) as r:
        await r.drain()
        assert len(_jobs(await _search(r.api, text="oldword0"))) == 1
        indexed = {k async for k in aredis.scan_iter(match="dlq_bridge:entries:*:by:w:oldword*")}
        assert len(indexed) == keep
        for batch in range(4):
            await aredis.lpush("dead_letter:orders", *(envelope_entry(job_id=f"new{batch}-{i}",
                                                                      last_error=f"Boom: newword{batch}x{i} failed")
                                                        for i in range(10)))
            await r.drain()
        assert r.runtime.pipeline.search_index is not None  # the drain's upkeep trims with it every minute
        assert await SearchIndex(aredis).trim_indexed() == 1  # what another replica's upkeep does
        left = {k async for k in aredis.scan_iter(match="dlq_bridge:entries:*:by:w:*word*")}
        jobs = await aredis.zcard("dlq_bridge:entries:{dead_letter:orders}:jobs")
    assert left == set(), "the words of trimmed records are gone; the kept ones were never indexed"
    assert jobs <= keep
