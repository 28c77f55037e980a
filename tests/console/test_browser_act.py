"""Select and act, Retry all and live pages in real Chromium against a real bridge (issue 35).

The module's bridge refreshes its pages every second (`[console] refresh_s = 1`). Each test counts
the clicks its task takes (the token paste aside): the report's "clicks per task" figures.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import pytest

from bridge.stores import keys
from tests.console.test_browser import Bridge, bridge, result_text, sent_to, use_token  # noqa: F401
from tests.support.bridge_process import wait_for
from tests.support.browser import Tab, browser_missing

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]


@pytest.fixture(scope="module")
def console_extra() -> dict[str, Any]:
    return {"refresh_s": 1}


class Clicks:
    """Clicks in one tab, counted."""

    def __init__(self, tab: Tab) -> None:
        self.tab, self.count = tab, 0

    def on(self, selector: str) -> None:
        self.tab.page.click(selector)
        self.count += 1


def rows(tab: Tab) -> list[str]:
    return [str(r.get_attribute("data-entry")) for r in tab.page.locator("#entries tbody tr").all()]


def test_five_chosen_entries_are_redriven_in_seven_clicks(bridge: Bridge, tab: Tab) -> None:  # noqa: F811
    queue = f"pick-{uuid.uuid4().hex[:6]}"
    jobs = [bridge.push(queue, job_id=f"{queue}-{i}", last_error=f"ValueError: row {i}") for i in range(8)]
    bridge.wait_archived(queue, 8)
    tab.page.goto(f"{bridge.url}/console/source?key=dead_letter:{queue}")
    use_token(tab)
    chosen = jobs[1:6]
    clicks = Clicks(tab)
    for job in chosen:
        clicks.on(f"#entries input.pick[data-id='{bridge.entry_id(queue, job)}']")
    assert tab.page.inner_text("#sel-n") == "5"
    clicks.on("#select button.sel-act[data-action=redrive]")
    tab.page.wait_for_selector("#sel-confirm:not([hidden])")
    assert tab.page.inner_text("#sel-count").startswith("5 entries to redrive")
    clicks.on("#sel-go")
    assert "Bulk redrive: 5 of 5 done, 0 skipped" in result_text(tab)
    assert clicks.count == 7
    moved = sorted(json.loads(e)["job_id"] for e in bridge.redis.lrange(queue, 0, -1))
    assert moved == sorted(chosen), "exactly the ticked entries went back to their work queue"
    assert sorted(j["job_id"] for j in bridge.archived(queue)) == sorted(set(jobs) - set(chosen))
    audit = [json.loads(a) for a in bridge.redis.lrange(keys.AUDIT, 0, 3)]
    assert (audit[0]["who"], audit[0]["action"], audit[0]["target"].split(": ", 1)[1]) == (
        "alice",
        "bulk-redrive",
        "5 chosen entries",
    )


def test_an_unreadable_entry_offers_no_redrive(bridge: Bridge, tab: Tab) -> None:  # noqa: F811
    queue = f"garbled-{uuid.uuid4().hex[:6]}"
    bridge.redis.lpush(f"dead_letter:{queue}", b"\xff\xfe not json at all")
    assert wait_for(lambda: bridge.redis.llen(keys.alerted(f"dead_letter:{queue}")) == 1, 20)
    tab.page.goto(f"{bridge.url}/console/source?key=dead_letter:{queue}")
    tab.page.click("#entries tbody td a")
    assert "cannot be read" in tab.page.inner_text("#no-redrive")
    assert tab.page.locator("button.act:has-text('Redrive')").count() == 0


def test_retry_all_delivers_every_undeliverable_in_two_clicks(bridge: Bridge, tab: Tab) -> None:  # noqa: F811
    jobs = [bridge.push("retry-all", job_name="send_invoice"), bridge.push("retry-all", job_name="send_invoice")]
    assert wait_for(lambda: bridge.redis.llen(keys.UNDELIVERABLE) == 2, 20), "the two 410s make them undeliverable"
    tab.page.goto(f"{bridge.url}/console/undeliverable")
    use_token(tab)
    clicks = Clicks(tab)
    clicks.on("#retry-all-bar button.act")
    assert tab.page.inner_text("#retry-all-bar button.act").startswith("Retry all 2?"), "asks before acting"
    clicks.on("#retry-all-bar button.act")
    assert re.search(r"Retry all: 2 of 2 delivered", result_text(tab))
    assert clicks.count == 2
    assert bridge.redis.llen(keys.UNDELIVERABLE) == 0
    assert all(sent_to(bridge.flaky, job) for job in jobs), "each alert reached its sink on the retry"
    assert tab.page.locator("#undeliverable").count() == 0, "the page says nothing is undeliverable any more"


def test_a_page_updates_itself_keeping_ticked_boxes_until_paused(bridge: Bridge, tab: Tab) -> None:  # noqa: F811
    queue = f"live-{uuid.uuid4().hex[:6]}"
    first = [bridge.push(queue, job_id=f"{queue}-{i}") for i in range(2)]
    bridge.wait_archived(queue, 2)
    tab.page.goto(f"{bridge.url}/console/source?key=dead_letter:{queue}")
    use_token(tab)
    tab.page.evaluate("window.__notReloaded = true")
    kept = bridge.entry_id(queue, first[0])
    tab.page.click(f"#entries input.pick[data-id='{kept}']")
    later = bridge.push(queue, job_id=f"{queue}-later")
    assert wait_for(lambda: len(rows(tab)) == 3, 15), "the new entry appears without a reload"
    assert rows(tab)[0] == bridge.entry_id(queue, later), "newest first"
    assert tab.page.evaluate("window.__notReloaded === true"), "the page was updated in place, not reloaded"
    assert tab.page.is_checked(f"#entries input.pick[data-id='{kept}']"), "the ticked box stays ticked"
    assert tab.page.inner_text("#sel-n") == "1"
    stamp = tab.page.locator("#entries time").first
    assert re.fullmatch(r"just now|\d+ (s|min|h|d) ago", stamp.inner_text()), stamp.inner_text()
    assert stamp.get_attribute("title"), "the absolute time, in the browser's zone, on hover"

    tab.page.click("#live-toggle")
    assert tab.page.inner_text("#live-toggle") == "Live updates paused"
    bridge.push(queue, job_id=f"{queue}-paused")
    bridge.wait_archived(queue, 4)
    time.sleep(2.5)  # two refresh periods: a live page would have shown it by now
    assert len(rows(tab)) == 3, "a paused page stays as the reader left it"
    tab.page.click("#live-toggle")
    assert wait_for(lambda: len(rows(tab)) == 4, 15), "resumed, it catches up"


def test_the_overview_and_the_queue_page_chart_what_was_handed_off(bridge: Bridge, tab: Tab) -> None:  # noqa: F811
    queue = f"trend-{uuid.uuid4().hex[:6]}"
    for i in range(3):
        bridge.push(queue, job_id=f"{queue}-{i}")
    bridge.wait_archived(queue, 3)

    def charted(path: str) -> int:
        tab.page.goto(f"{bridge.url}{path}")
        bars = tab.page.locator("#trend-hours rect").all()
        return sum(int(str(b.get_attribute("data-count"))) for b in bars)

    assert wait_for(lambda: charted(f"/console/source?key=dead_letter:{queue}") == 3, 15), "the queue's own count"
    assert charted("/console/") >= 3, "the overview counts every queue"
    assert tab.page.locator("#trend-days rect").count() == 30
