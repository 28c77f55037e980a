"""The console pages, rendered in-process from hostile views: escaping, live links, headers.

The browser tests (test_browser.py) run the same pages in Chromium against a
real bridge; these check the HTML itself, quickly and for every page.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
import redis.exceptions
from fastapi import FastAPI

from bridge.console.history import Acted, HistoryItem
from bridge.console.pages import CSP, pages_router
from bridge.console.render import runbook_href
from bridge.console.search import SearchFilter, SearchPage
from bridge.console.service import ConsoleService
from bridge.console.views import (
    EntryPage,
    EntryView,
    EnvelopeView,
    GatewayView,
    GroupMemberView,
    GroupSummaryView,
    GroupView,
    Link,
    MemoryPlanView,
    Overview,
    RetentionNote,
    SilenceComment,
    SilenceMatchers,
    SilenceView,
    SinkDelivery,
    SinkView,
    SourceView,
    SummarySourceCounts,
    SummaryView,
    TokenDayView,
    UndeliverableView,
)
from bridge.core.models import Severity, SummarySource
from bridge.core.silence_match import Matcher
from bridge.stores.audit import AuditRecord

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_URL = "javascript:alert(1)"
HOSTILE = f"{SCRIPT}{IMG}{JS_URL}"
BASE = "https://runbooks.example.com/dlq"


def hostile_entry(runbook: Link | None) -> EntryView:
    envelope = EnvelopeView(
        source_key=f"dead_letter:{HOSTILE}", queue=HOSTILE, job_id=HOSTILE, job_name=HOSTILE, attempts=3,
        last_error=HOSTILE, payload_excerpt=HOSTILE, raw_digest="0123456789abcdef", fingerprint=HOSTILE,
        correlation_id=JS_URL,
    )
    summary = SummaryView(
        title=HOSTILE, severity=Severity.ERROR, likely_cause=f"see {JS_URL} and https://evil.example/x {SCRIPT}",
        next_steps=[IMG, JS_URL], runbook_hint=JS_URL, runbook=runbook, source=SummarySource.OPENCLAW,
    )
    return EntryView(
        id="0123456789abcdef", source=f"dead_letter:{HOSTILE}", archived_at=1_700_000_000.0, severity=Severity.ERROR,
        summary=summary, envelope=envelope, redrivable=True, in_archive=True,
        deliveries=[SinkDelivery(sink="slack", state="delivered", at=1_700_000_001.0, detail=HOSTILE,
                                 group_key=HOSTILE)],
    )


SECRET = "hunter2-secret-value"


class CollapsedArchive:
    """24 entries archived, 16 distinct: identical entries of repeated runs."""

    async def archived_sources(self, count: int) -> set[str]:
        return {"dead_letter:a"}

    async def totals(self, sources: list[str]) -> tuple[int, int]:
        return (24, 16) if sources else (0, 0)


class FixedTrends:
    """Every series: hour h holds h dead letters, day d holds 2·d."""

    async def series(self, fields: list[str], now: float) -> dict[str, tuple[list[int], list[int]]]:
        return {f: (list(range(24)), [2 * d for d in range(30)]) for f in fields}


class HostileService(ConsoleService):
    """The read side, answering every page with attacker-written strings."""

    def __init__(self, read_only: bool = False, runbook: Link | None = None) -> None:
        self.read_only = read_only
        self.runbook = runbook
        self.archive = CollapsedArchive()  # type: ignore[assignment]
        self.trends = FixedTrends()  # type: ignore[assignment]
        self._kinds = {}

    async def overview(self) -> Overview:
        counts = SummarySourceCounts(openclaw=1, cache=2, fallback=3)
        return Overview(
            generated_at=1_700_000_000.0,
            sources=[SourceView(source=f"dead_letter:{HOSTILE}", kind="list", queue=HOSTILE, depth=7, archived=11,
                                alerted_last_hour=5, summaries_last_hour=counts, redrivable=True)],
            groups=await self.groups(),
            sinks=[SinkView(name="slack", type="slack", health="degraded", health_detail=HOSTILE, queue_depth=2,
                            oldest_age_s=65, undeliverable=1, group_by="fingerprint", open_groups=1)],
            gateway=GatewayView(configured=True, breaker="closed", calls_per_minute=60, budget_left=42,
                                summaries_last_hour=counts, tokens_per_day=[
                                    TokenDayView(day="2023-11-14", calls=4, prompt_tokens=5200, completion_tokens=480,
                                                 estimated_calls=1),
                                    TokenDayView(day="2023-11-13", calls=0, prompt_tokens=0, completion_tokens=0,
                                                 estimated_calls=0),
                                    TokenDayView(day="2023-11-12", calls=2, prompt_tokens=2000, completion_tokens=200,
                                                 estimated_calls=0)]),
            undeliverable=1, active_silences=1, read_only=self.read_only, latest=[hostile_entry(self.runbook)],
            retention=[RetentionNote(store=HOSTILE, count=9, cap=10, setting="[sources] archive_max"),
                       RetentionNote(store="dramatiq set dramatiq:billing.XQ (dramatiq)", count=3500, cap=3600,
                                     setting="dead_message_ttl", unit="seconds")],
            memory_plan=MemoryPlanView(per_second=10.0, days=30, projected_bytes=900_000_000, largest=HOSTILE,
                                       maxmemory_bytes=1_000_000_000, warn=True, share=0.7),
        )

    async def source_entries(self, source: str, offset: int = 0, limit: int = 50) -> EntryPage:
        return EntryPage(source=source, offset=offset, limit=limit, total=60,
                         entries=[hostile_entry(self.runbook)], next_offset=offset + limit)

    async def entry(self, source: str, entry_id: str) -> EntryView | None:
        return hostile_entry(self.runbook) if entry_id == "0123456789abcdef" else None

    async def find_raw(self, source: str, entry_id: str) -> bytes | None:
        """The hostile job's own bytes: a secret in its arguments, hostile text in its backtrace."""
        job = {"job_id": HOSTILE, "args": [HOSTILE, {"password": SECRET}], "backtrace": [HOSTILE, "app.rb:7"]}
        return json.dumps(job).encode()

    async def history(self, source: str, entry_id: str) -> list[HistoryItem]:
        """Two hand-offs of the hostile job, hostile names acting on them."""
        entry = hostile_entry(self.runbook)
        return [HistoryItem(entry=entry, acted=[]),
                HistoryItem(entry=entry, acted=[Acted(who=HOSTILE, action=HOSTILE, at=1_700_000_000.0)])]

    async def groups(self) -> list[GroupSummaryView]:
        return [GroupSummaryView(sink="slack", group_key=f"fp:{HOSTILE}", title=HOSTILE, severity=Severity.ERROR,
                                 count=3, notified=1, first_seen=1.0, last_seen=2.0, queues={HOSTILE: 3})]

    async def group(self, sink: str, group_key: str) -> GroupView | None:
        member = GroupMemberView(idempotency_key=HOSTILE, queue=HOSTILE, job_id=HOSTILE, job_name=HOSTILE,
                                 last_error=HOSTILE, entry_id=HOSTILE, source=HOSTILE, added_at=1.0, notified=True)
        first = (await self.groups())[0]
        return GroupView(**first.model_dump(), jobs=[member], jobs_total=3)

    async def undeliverable(self, limit: int = 100) -> list[UndeliverableView]:
        return [UndeliverableView(id=HOSTILE, sink="pd", status=400, error=HOSTILE, queue=HOSTILE, job_id=HOSTILE,
                                  source_key=HOSTILE, raw_digest=HOSTILE, retryable=True)]

    async def silences(self, include_expired: bool = False) -> list[SilenceView]:
        return [SilenceView(id=HOSTILE, matchers=SilenceMatchers(queue=HOSTILE, job_name=HOSTILE), starts_at=1.0,
                            label_matchers=[Matcher(name="queue", op="=~", value=HOSTILE)], state="active",
                            ends_at=2.0, reason=HOSTILE, author=HOSTILE, webhooks=False, active=True,
                            comments=[SilenceComment(author=HOSTILE, at=1.0, text=HOSTILE)])]

    async def audit(self, limit: int = 100) -> list[AuditRecord]:
        return [AuditRecord(at=1.0, who=HOSTILE, action="redrive", target=HOSTILE, outcome="ok", detail=HOSTILE)]

    async def search(self, query: SearchFilter) -> SearchPage:
        return SearchPage(filter=query, entries=[hostile_entry(self.runbook)], next_before="1700000000000.25",
                          scanned=1, complete=True)


def client_for(service: ConsoleService | None, base_url: str | None = BASE) -> httpx.AsyncClient:
    app = FastAPI()
    app.include_router(pages_router(lambda: service, base_url))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test")


PAGES = [
    "/console/",
    f"/console/source?key=dead_letter:{HOSTILE}",
    "/console/entry?source=x&id=0123456789abcdef",
    "/console/groups",
    "/console/group?sink=slack&key=k",
    "/console/undeliverable",
    "/console/silences",
    f"/console/silences?queue={HOSTILE}&job_name={HOSTILE}&fingerprint={IMG}",  # a link someone sent you
    "/console/audit",
    f"/console/search?text={HOSTILE}&queue={IMG}&source={HOSTILE}&error={SCRIPT}&job={JS_URL}",  # filter values
]


def hrefs(html: str) -> list[str]:
    return re.findall(r'(?<![-\w])(?:href|src|action)="([^"]*)"', html)  # not data-action=


@pytest.mark.parametrize("path", PAGES)
async def test_every_page_escapes_hostile_text_and_links_only_to_itself(path: str) -> None:
    async with client_for(HostileService()) as client:
        response = await client.get(path)
    assert response.status_code == 200
    html = response.text
    assert "<script>alert" not in html and "<img" not in html, "untrusted markup must come out as text"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "onerror=alert(1)&gt;" in html and '"><img' not in html
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts[0] == '<script src="/console/static/console.js" defer>', "console.js, from our own static file"
    own = {'<script src="/console/static/silences.js" defer>'}  # the silences page's own, after it
    assert set(scripts[1:]) <= own and len(scripts) <= 2, "only our own static scripts"
    for href in hrefs(html):
        assert href.startswith(("/console/", "/api/v1/export?")), f"a page links only to the console: {href}"
        assert "javascript:" not in href.lower() and '"' not in href and "<" not in href


@pytest.mark.parametrize("path", [*PAGES, "/console/static/console.js", "/console/static/console.css",
                                  "/console/static/silences.js", "/console/static/silences.css"])
async def test_every_console_response_carries_the_security_headers(path: str) -> None:
    async with client_for(HostileService()) as client:
        response = await client.get(path)
    assert response.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "frame-ancestors 'none'" in CSP and "unsafe-inline" not in CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


async def test_model_urls_are_text_and_only_the_bridges_runbook_link_is_live() -> None:
    own = Link(text="timeouts", url=f"{BASE}/timeouts.md", clickable=True)
    async with client_for(HostileService(runbook=own)) as client:
        html = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
    assert f'href="{BASE}/timeouts.md"' in html
    assert "https://evil.example/x" in html and 'href="https://evil.example' not in html
    assert not [h for h in hrefs(html) if not h.startswith(("/console/", BASE + "/"))]


@pytest.mark.parametrize(
    ("link", "base"),
    [
        (Link(text="t", url="https://evil.example/dlq/timeouts.md", clickable=True), BASE),  # not under base_url
        (Link(text="t", url=f"{BASE}/timeouts.md", clickable=False), BASE),  # not the bridge's own link
        (Link(text="t", url=f"{BASE}/timeouts.md", clickable=True), None),  # no base_url configured
        (Link(text="t", url=f"{BASE}/x\" onmouseover=\"alert(1)", clickable=True), BASE),
        (Link(text="t", url="javascript:alert(1)//" + BASE, clickable=True), BASE),
        (Link(text="t", url=f"{BASE}evil.example/x.md", clickable=True), BASE),  # a sibling of base_url
    ],
)
def test_a_runbook_link_outside_base_url_is_never_live(link: Link, base: str | None) -> None:
    assert runbook_href(link, base) is None


async def test_the_overview_lists_what_is_failing_now_and_groups_newest_first() -> None:
    async with client_for(HostileService()) as client:
        html = (await client.get("/console/")).text
    latest = html.split('id="latest"', 1)[1].split("</table>", 1)[0]
    assert "0123456789abcdef" in latest and "&lt;script&gt;" in latest and "2023-11-14 22:13:20 UTC" in latest
    assert "/console/group?sink=slack&amp;key=" in latest, "the entry's open group is linked"
    banner = html.split('id="retention"', 1)[1].split("</section>", 1)[0]
    assert "9 of 10" in banner and "[sources] archive_max" in banner and "&lt;script&gt;" in banner
    assert "3500 of 3600 seconds (the age of the oldest)" in banner, "a store trimmed by age says so"
    plan = html.split('id="memory-plan"', 1)[1].split("</section>", 1)[0]
    assert "10.00 dead letters a second" in plan and "<b>900 MB</b>" in plan and "90 % of maxmemory (1,000 MB)" in plan
    assert "more than 70 %" in plan and "&lt;script&gt;" in plan
    assert 'role="alert"' in html.split('id="memory-plan"')[0][-60:], "past the share: a banner"


async def test_the_overview_shows_the_models_tokens_per_day() -> None:
    async with client_for(HostileService()) as client:
        html = (await client.get("/console/")).text
    table = html.split('id="tokens"', 1)[1].split("</table>", 1)[0]
    today = table.split('data-day="2023-11-14"', 1)[1].split("</tr>", 1)[0]
    assert '"num calls">4<' in today and "5,200" in today and ">480<" in today
    assert "1,420" in today, "(5,200 + 480) / 4 tokens per call"
    assert "1 of the calls had no usage" in today, "an estimated day says so"
    assert 'data-day="2023-11-13"' not in table, "a day without a call is not listed"
    assert "<th>3 days</th><td class=\"num\">6</td>" in table and "7,200" in table, "the week's total"


async def test_read_only_mode_shows_no_token_box_and_no_action_button() -> None:
    async with client_for(HostileService(read_only=True)) as client:
        pages = [(await client.get(p)).text for p in PAGES]
    for html in pages:
        assert "Read-only: no console token is configured" in html
        assert 'id="token-form"' not in html and "data-api=" not in html
    async with client_for(HostileService(read_only=False)) as client:
        entry = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
        undeliverable = (await client.get("/console/undeliverable")).text
    assert 'id="token-form"' in entry and "data-api=" in entry
    assert "Retry</button>" in undeliverable and "Discard</button>" in undeliverable


async def test_actions_address_the_api_with_every_untrusted_part_percent_encoded() -> None:
    async with client_for(HostileService()) as client:
        html = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
    paths: list[Any] = re.findall(r'data-api="([^"]*)"', html)
    assert paths == ["/api/v1/entry/redrive?source=dead_letter%3A%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%3E%3Cimg"
                     "%20src%3Dx%20onerror%3Dalert%281%29%3Ejavascript%3Aalert%281%29&amp;id=0123456789abcdef"]


class RedisDown(HostileService):
    async def overview(self) -> Overview:
        raise redis.exceptions.ConnectionError("Connection refused")


async def test_a_redis_outage_is_a_503_page_with_the_same_headers() -> None:
    async with client_for(RedisDown()) as client:
        response = await client.get("/console/")
    assert response.status_code == 503 and "Redis unavailable" in response.text
    assert response.headers["content-security-policy"] == CSP


async def test_unknown_entry_is_404_and_a_starting_bridge_is_503() -> None:
    async with client_for(HostileService()) as client:
        assert (await client.get("/console/entry?source=x&id=ffffffffffffffff")).status_code == 404
        assert (await client.get("/console/static/../pages.py")).status_code == 404
    async with client_for(None) as client:
        response = await client.get("/console/")
    assert response.status_code == 503 and "starting" in response.text


async def test_the_entry_page_expands_the_whole_job_redacted_and_offers_copy_buttons() -> None:
    async with client_for(HostileService()) as client:
        html = (await client.get("/console/entry?source=x&id=0123456789abcdef")).text
    full = html.split('id="full-job"', 1)[1].split("</details>", 1)[0]
    assert "[REDACTED]" in full and SECRET not in html, "the arguments are redacted as intake redacts them"
    assert "app.rb:7" in full.split('id="full-backtrace"', 1)[1], "the backtrace is shown apart"
    assert "&lt;script&gt;" in full and "<script>alert" not in full
    assert 'id="copy-job-id"' in html and 'id="copy-redrive"' in html
    assert 'data-copy="dlq-bridge redrive &#39;dead_letter:' in html, "the command quotes the untrusted source"


async def test_search_says_when_identical_entries_are_shown_once() -> None:
    async with client_for(HostileService()) as client:
        html = (await client.get("/console/search?all=1")).text
    assert "the archives hold 24 entries, 16 distinct: 8 identical ones" in html


async def test_the_overview_and_the_queue_page_draw_the_trends_as_inline_svg() -> None:
    async with client_for(HostileService()) as client:
        overview = (await client.get("/console/")).text
        source = (await client.get("/console/source?key=dead_letter:orders")).text
    for html in (overview, source):
        hours = html.split('id="trend-hours"', 1)[1].split("</svg>", 1)[0]
        days = html.split('id="trend-days"', 1)[1].split("</svg>", 1)[0]
        assert hours.count("<rect") == 24 and days.count("<rect") == 30
        assert 'height="38" data-count="23"' in hours, "the busiest hour fills the chart"
        assert "per day, last 30 days (870)" in html
    assert "Queue orders: per hour" in source
