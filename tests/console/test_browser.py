"""The console in real headless Chromium (Debian's), against a real bridge, Redis and local sinks.

One bridge process serves the whole module: console on, a token, a Slack-like,
a PagerDuty-like and a webhook receiver, a fake OpenClaw gateway, and a watched
Sidekiq dead set (its depth stays put). Each test uses queues of its own.
The overview and entry screenshots are taken here: into each test's tmp dir, or, to refresh
the README's, into the folder DLQ_BRIDGE_SCREENSHOTS names
(`DLQ_BRIDGE_SCREENSHOTS=docs/img python -m pytest tests/console/test_browser.py`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_for, wait_healthz, write_config
from tests.support.browser import Tab, browser_missing
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]

TOKEN = "console-token-" + uuid.uuid4().hex
RUNBOOKS = "https://runbooks.example.com/dlq"
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_URL = "javascript:alert(1)"
HOSTILE = f"{SCRIPT} {IMG} {JS_URL}"


def model_reply(envelope: dict[str, Any]) -> str:
    """Plausible summaries; hostile ones for the XSS entries (their job names say so)."""
    name = str(envelope.get("job_name") or "")
    hint = "timeout" if "Timeout" in str(envelope.get("last_error")) else ""
    if name.startswith("xss-hint"):
        hint = JS_URL  # not a runbook id: the bridge refuses the reply and falls back
    if name.startswith("xss"):
        return json.dumps({
            "title": f"{SCRIPT}{IMG}"[:120], "severity": "error",
            "likely_cause": f"Open {JS_URL} or https://evil.example/steal {IMG}",
            "next_steps": [SCRIPT, f"[click]({JS_URL})"], "runbook_hint": hint,
        })
    error = str(envelope.get("last_error") or "")
    cls, _, text = error.partition(": ")
    return json.dumps({
        "title": f"{name}: {text or cls}"[:120],
        "severity": "error",
        "likely_cause": CAUSES.get(cls, "The job raised an error its worker did not handle."),
        "next_steps": STEPS.get(cls, ["Read the job's last error", "Redrive the job once the cause is fixed"]),
        "runbook_hint": hint,
    })


CAUSES = {
    "TimeoutError": "The upstream service did not answer within 30 s; the job gave up after its retries.",
    "CardDeclined": "The card issuer was unavailable, so the payment provider declined every attempt.",
    "SMTPServerDisconnected": "The mail relay closed the connection mid-send (relay restart or connection limit).",
}
STEPS = {
    "TimeoutError": ["Check the upstream service's status page and latency", "Redrive the job once it answers"],
    "CardDeclined": ["Check the payment provider's status", "Redrive once the issuer is back; do not charge twice"],
}


@dataclass
class Bridge:
    url: str
    redis: redis.Redis
    slack: Receiver
    pagerduty: Receiver
    webhook: Receiver
    flaky: Receiver
    gateway: FakeGateway

    def push(self, queue: str, **fields: Any) -> str:
        job_id = fields.setdefault("job_id", f"{queue}-{uuid.uuid4().hex[:8]}")
        entry = {"job_name": "ship_order", "attempts": 5, "correlation_id": "req-7f3a",
                 "last_error": "TimeoutError: warehouse API timed out after 30s",
                 "first_failed_at": "2026-11-30T19:58:02+00:00", "payload_excerpt": '{"order": 48213}', **fields}
        self.redis.lpush(f"dead_letter:{queue}", json.dumps(entry))
        return str(job_id)

    def archived(self, queue: str) -> list[dict[str, Any]]:
        return [json.loads(e) for e in self.redis.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1)]

    def wait_archived(self, queue: str, count: int = 1) -> None:
        assert wait_for(lambda: len(self.archived(queue)) >= count, 20), f"{queue} was never archived"

    def entry_id(self, queue: str, job_id: str) -> str:
        import hashlib

        for raw in self.redis.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1):
            if json.loads(raw).get("job_id") == job_id:
                return hashlib.sha256(raw).hexdigest()[:16]
        raise AssertionError(f"{job_id} is not in the archive of {queue}")


def sent_to(receiver: Receiver, job_id: str) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.requests if job_id in r.body.decode(errors="replace")]


def _sinks(slack: str, pd: str, hook: str, flaky: str) -> list[dict[str, Any]]:
    return [
        {"name": "slack-ops", "type": "slack", "url": f"{slack}/slack", "messages_per_second": 50,
         "group_by": "none"},
        {"name": "pagerduty", "type": "pagerduty", "routing_key": "rk", "events_url": f"{pd}/pd",
         "group_by": "none", "queues": ["redrive*", "orders*", "payments*"]},
        {"name": "incidents-api", "type": "webhook", "url": f"{hook}/hook", "secret": "s"},
        {"name": "flaky-api", "type": "webhook", "url": f"{flaky}/flaky", "secret": "s", "queues": ["retry*"]},
        {"name": "payments-digest", "type": "webhook", "url": f"{hook}/digest", "secret": "s",
         "queues": ["payments*"], "group_by": "fingerprint", "group_wait_s": 3600},
    ]


@pytest.fixture(scope="module")
def bridge(redis_url: str, tmp_path_factory: pytest.TempPathFactory, console_extra: dict[str, Any]) -> Iterator[Bridge]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    slack, pd, hook = Receiver(), Receiver(default=Reply(202)), Receiver()
    flaky = Receiver(script=[Reply(410, body="gone for now")] * 2)  # the first two alerts are refused for good
    port = free_port()
    gateway = FakeGateway(responder=model_reply)
    with (
        ThreadedServer(gateway.app()) as gw, ThreadedServer(slack.app) as sl, ThreadedServer(pd.app) as pds,
        ThreadedServer(hook.app) as wh, ThreadedServer(flaky.app) as fl,
    ):
        cfg = write_config(tmp_path_factory.mktemp("console") / "bridge.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "console-1"},
            "sources": {"rescan_interval_s": 0.2, "concurrency": 4},
            "openclaw": {"url": gw.url, "token": "t", "calls_per_minute": 0},
            "runbooks": {"base_url": RUNBOOKS},
            "console": {"enabled": True, "token_env": "CONSOLE_TEST_TOKEN", **console_extra},
            "delivery": {"max_attempts": 2, "base_delay_s": 0.05, "max_delay_s": 0.1},
            "sinks": _sinks(sl.url, pds.url, wh.url, fl.url),
            "sources.sidekiq": [{"namespace": ""}],
        })
        proc = start_bridge(["--config", str(cfg), "run"], env={"CONSOLE_TEST_TOKEN": TOKEN})
        try:
            wait_healthz(port, proc)
            yield Bridge(f"http://127.0.0.1:{port}", client, slack, pd, hook, flaky, gateway)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            client.flushdb()
            client.close()


def use_token(tab: Tab, token: str = TOKEN) -> None:
    tab.page.fill("#token-input", token)
    tab.page.fill("#who-input", "alice")
    tab.page.click("#token-form button[type=submit]")
    tab.page.wait_for_selector("#token-state:has-text('token set')")


def result_text(tab: Tab) -> str:
    tab.page.wait_for_selector("#action-result:not([hidden])", timeout=15000)
    return str(tab.page.inner_text("#action-result"))


def sidekiq_dead(client: redis.Redis, count: int) -> None:
    """Sidekiq's dead set as Sidekiq writes it (a watched store: the bridge never removes a job)."""
    now = time.time()
    for i in range(count):
        job = {"class": "BillingWorker", "args": [i], "jid": f"sk{i:022d}", "queue": "billing", "retry": 0,
               "error_class": "Stripe::CardError", "error_message": "card declined", "failed_at": now - i,
               "created_at": now - 60}
        client.zadd("dead", {json.dumps(job): now - i})


def shots(tmp_path: Path) -> Path:
    """Where screenshots go: DLQ_BRIDGE_SCREENSHOTS, else the test's own tmp dir (never the checkout)."""
    folder = Path(os.environ.get("DLQ_BRIDGE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_overview_lists_sources_sinks_gateway_and_open_groups(bridge: Bridge, tab: Tab, tmp_path: Path) -> None:
    """Runs first, on a tidy data set: its screenshot is the README's."""
    sidekiq_dead(bridge.redis, 4)
    failures = {"payments": ("charge_card", "CardDeclined: issuer unavailable", 2),
                "emails": ("send_receipt", "SMTPServerDisconnected: relay closed the connection", 3),
                "exports": ("export_csv", "TimeoutError: S3 upload timed out after 30s", 1),
                "orders": ("ship_order", "TimeoutError: warehouse API timed out after 30s", 4)}
    for queue, (name, error, count) in failures.items():
        for j in range(count):
            bridge.push(queue, job_name=name, job_id=f"{queue}-{1041 + j}", last_error=error)
    for queue, (_, _, count) in failures.items():
        bridge.wait_archived(queue, count)
    tab.page.goto(f"{bridge.url}/console/")
    assert wait_for(lambda: _sidekiq_archived(tab) == "4", 20), "the watched Sidekiq dead set is alerted"
    rows = {r["source"]: r for r in _source_rows(tab)}
    assert {s: r["archived"] for s, r in rows.items() if s.startswith("dead_letter:")} == {
        "dead_letter:payments": "2", "dead_letter:emails": "3", "dead_letter:exports": "1", "dead_letter:orders": "4"}
    assert rows["dead_letter:orders"]["alerted"] == "4"
    sinks = {r.get_attribute("data-sink") for r in tab.page.locator("#sinks tbody tr").all()}
    assert sinks == {"slack-ops", "pagerduty", "incidents-api", "flaky-api", "payments-digest"}
    assert "closed" in tab.page.inner_text("#gateway")
    assert wait_for(lambda: _open_group_counts(tab) == ["2"], 10), "the payments digest holds its group open"
    tab.page.screenshot(path=str(shots(tmp_path) / "console-overview.png"), full_page=True)
    tab.page.click("table.groups tbody a")
    members = tab.page.locator("table.members tbody tr").all_inner_texts()
    assert sorted(m.split()[0] for m in members) == ["payments-1041", "payments-1042"]


def _sidekiq_archived(tab: Tab) -> str:
    tab.page.reload()
    return next((r["archived"] for r in _source_rows(tab) if r["kind"] == "sidekiq"), "")


def _open_group_counts(tab: Tab) -> list[str]:
    tab.page.reload()
    return [cells.split("\t")[3] for cells in tab.page.locator("table.groups tbody tr").all_inner_texts()]


def test_overview_shows_the_real_depths(bridge: Bridge, tab: Tab) -> None:
    """A slow gateway holds the claims (4 at once): the rest of the backlog waits in the DLQ."""
    bridge.gateway.latency_s = 4.0
    try:
        for i in range(12):
            bridge.push("backlog", job_id=f"backlog-{i}", last_error=f"ValueError: row {i} has no column c{i}")
        assert wait_for(lambda: bridge.redis.llen("dead_letter:backlog") <= 8, 10)
        shown = _depth_of(tab, bridge, "dead_letter:backlog")
        assert shown is not None and shown >= 1, "the backlog the bridge has not claimed yet"
    finally:
        bridge.gateway.latency_s = 0.0
    bridge.wait_archived("backlog", 12)
    assert _depth_of(tab, bridge, "dead_letter:backlog") == 0


def _depth_of(tab: Tab, bridge: Bridge, source: str) -> int | None:
    """The page's depth of `source`, read while Redis's LLEN stayed the same around the page load."""
    for _ in range(20):
        before = int(bridge.redis.llen(source))
        tab.page.goto(f"{bridge.url}/console/")
        after = int(bridge.redis.llen(source))
        if before == after:
            row = next(r for r in _source_rows(tab) if r["source"] == source)
            assert row["depth"] == str(before), f"the page shows depth {row['depth']}, Redis has {before}"
            return before
    return None


def _source_rows(tab: Tab) -> list[dict[str, str]]:
    rows = []
    for row in tab.page.locator("#sources tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        rows.append({"source": cells[0], "kind": cells[1], "queue": cells[2], "depth": cells[3],
                     "archived": cells[4], "alerted": cells[5]})
    return rows


def test_a_dead_letter_shows_its_summary_and_where_it_went(bridge: Bridge, tab: Tab, tmp_path: Path) -> None:
    job = bridge.push("orders-eu", job_name="ship_order")
    bridge.wait_archived("orders-eu")
    assert wait_for(lambda: sent_to(bridge.slack, job) and sent_to(bridge.webhook, job), 20)
    tab.page.goto(f"{bridge.url}/console/source?key=dead_letter:orders-eu")
    tab.page.click("#entries tbody td a")
    page = tab.page
    assert page.inner_text("#title") == "ship_order: warehouse API timed out after 30s"
    assert "did not answer within 30 s" in page.inner_text(".summary .cause")
    assert page.locator(".summary .steps li").count() == 2
    link = page.locator(".summary .runbook a")
    assert link.get_attribute("href") == f"{RUNBOOKS}/timeout.md"
    envelope = page.inner_text(".envelope")
    assert job in envelope and "TimeoutError: warehouse API timed out after 30s" in envelope
    assert wait_for(lambda: _states(tab, reload=True) == {"slack-ops": "delivered", "pagerduty": "delivered",
                                                          "incidents-api": "delivered"}, 15), _states(tab)
    page.screenshot(path=str(shots(tmp_path) / "console-entry.png"), full_page=True)


def _states(tab: Tab, reload: bool = False) -> dict[str, str]:
    if reload:
        tab.page.reload()
    rows = tab.page.locator("table.deliveries tbody tr").all()
    return {str(r.get_attribute("data-sink")): str(r.get_attribute("data-state")) for r in rows}


def test_a_silence_previewed_and_made_in_the_page_stops_the_next_matching_slack_card(bridge: Bridge, tab: Tab) -> None:
    earlier = bridge.push("maintenance-search", job_name="reindex")
    bridge.push("maintenance-search", job_name="warm_cache")
    bridge.wait_archived("maintenance-search", 2)
    tab.page.goto(f"{bridge.url}/console/silences")
    use_token(tab)
    form = tab.page.locator("#silence-new")
    first = form.locator(".matcher-row").nth(0)
    first.locator("select[name=m-op]").select_option("=~")
    first.locator("input[name=m-value]").fill("maintenance-.*")
    form.locator("#matcher-add").click()
    second = form.locator(".matcher-row").nth(1)
    second.locator("select[name=m-name]").select_option("job_name")
    second.locator("input[name=m-value]").fill("reindex")
    form.locator("input[name=reason]").fill("search cluster upgrade, expected failures")
    form.locator("#silence-preview").click()
    tab.page.wait_for_selector("#preview:not([hidden])")
    assert tab.page.inner_text("#preview-summary").startswith("1 of ")
    previewed = tab.page.locator("#preview-entries tbody tr")
    assert previewed.count() == 1 and "reindex" in previewed.inner_text()
    assert "slack-ops" in previewed.inner_text() and "incidents-api" not in previewed.inner_text()
    assert earlier and "warm_cache" not in tab.page.inner_text("#preview")
    form.locator("button[type=submit]").click()
    assert "Silence created" in result_text(tab)
    row = tab.page.inner_text("#silences tr.active")
    assert 'queue=~"maintenance-.*"' in row and 'job_name="reindex"' in row and "alice" in row
    ends = float(tab.page.locator("#silences tr.active").get_attribute("data-ends") or 0)
    tab.page.locator("#silences tr.active button.silence-extend").click()
    tab.page.wait_for_selector("#action-result:has-text('Silence extended')", timeout=15000)
    assert float(tab.page.locator("#silences tr.active").get_attribute("data-ends") or 0) == ends + 3600
    tab.page.locator("#silences tr.active form.silence-comment input[name=text]").fill("upgrade runs late")
    tab.page.locator("#silences tr.active form.silence-comment button").click()
    tab.page.wait_for_selector("#action-result:has-text('Comment added')", timeout=15000)
    assert "alice" in tab.page.inner_text("#silences tr.active .comments")
    silenced = bridge.push("maintenance-search", job_name="reindex")
    loud = bridge.push("maintenance-search", job_name="rebuild_cache")
    bridge.wait_archived("maintenance-search", 4)
    assert wait_for(lambda: sent_to(bridge.slack, loud) and sent_to(bridge.webhook, silenced), 20)
    time.sleep(1.0)  # a card would have left with (or right after) the other one
    assert sent_to(bridge.slack, silenced) == [], "the silence stops the Slack card"
    assert sent_to(bridge.pagerduty, silenced) == []
    tab.page.goto(f"{bridge.url}/console/entry?source=dead_letter:maintenance-search"
                  f"&id={bridge.entry_id('maintenance-search', silenced)}")
    assert _states(tab)["slack-ops"] == "silenced" and _states(tab)["incidents-api"] == "delivered"

    tab.page.goto(f"{bridge.url}/console/silences")
    tab.page.locator("#silences tr.active button.act:has-text('Expire')").click()
    assert "Expire" in result_text(tab)
    assert tab.page.locator("#silences tr.active").count() == 0
    after = bridge.push("maintenance-search", job_name="reindex")
    assert wait_for(lambda: sent_to(bridge.slack, after), 20), "an expired silence no longer holds the card back"
    tab.page.goto(f"{bridge.url}/console/audit")
    audit = tab.page.inner_text("#audit")
    assert "alice" in audit and "silence" in audit


def test_redrive_from_the_page_returns_the_job_and_resolves_its_page(bridge: Bridge, tab: Tab) -> None:
    job = bridge.push("redrive-me", job_name="charge_card")
    bridge.wait_archived("redrive-me")
    assert wait_for(lambda: sent_to(bridge.pagerduty, job), 20)
    tab.page.goto(f"{bridge.url}/console/entry?source=dead_letter:redrive-me&id={bridge.entry_id('redrive-me', job)}")
    use_token(tab)
    tab.page.click("button.act:has-text('Redrive')")
    assert "Redrive" in result_text(tab)
    work = [json.loads(e) for e in bridge.redis.lrange("redrive-me", 0, -1)]
    assert [w["job_id"] for w in work] == [job], "the job is back on its work queue"
    assert bridge.archived("redrive-me") == []
    assert wait_for(lambda: any(e.get("event_action") == "resolve" for e in sent_to(bridge.pagerduty, job)), 15), (
        "redrive resolves the PagerDuty alert with its dedup_key"
    )
    resolve = next(e for e in sent_to(bridge.pagerduty, job) if e.get("event_action") == "resolve")
    assert resolve["dedup_key"] == job


def test_a_cause_redriven_twice_says_so_on_its_page_and_its_next_card(
    bridge: Bridge, tab: Tab, tmp_path: Path
) -> None:
    """Redriven from the page twice, with a note, and failed again each time: the third alert and its
    page say so (seen before). Its screenshot is docs/img/console-seen-before.png."""
    error = "LockNotAvailable: could not obtain lock on row in relation \"stock_levels\""
    for n in (1, 2, 3):
        job = bridge.push("orders-restock", job_name="restock_item", job_id=f"restock-{n}", last_error=error)
        bridge.wait_archived("orders-restock")
        if n == 3:
            break
        tab.page.goto(f"{bridge.url}/console/entry?source=dead_letter:orders-restock"
                      f"&id={bridge.entry_id('orders-restock', job)}")
        use_token(tab)
        tab.page.fill("#redrive-note", f"lock holder killed, try {n}")
        tab.page.click("button.act:has-text('Redrive')")
        assert "Redrive" in result_text(tab)
        assert bridge.redis.rpop("orders-restock") is not None, "the job went back to its work queue"
    assert wait_for(lambda: sent_to(bridge.slack, job), 20)
    card = json.dumps(sent_to(bridge.slack, job)[0])
    assert "Seen before: 2 times in 30 days" in card and "did not help 2 of the last 2 times" in card
    assert "lock holder killed, try 2" in card
    tab.page.goto(f"{bridge.url}/console/entry?source=dead_letter:orders-restock"
                  f"&id={bridge.entry_id('orders-restock', job)}")
    seen = tab.page.inner_text("#seen-before")
    assert "Seen before: 2 times in 30 days" in seen and "redriven by" in seen and "failed again" in seen
    assert 'note: "lock holder killed, try 2"' in seen
    print(f"\nthe third alert's Slack card: {card}\nits console page: {seen}")
    tab.page.screenshot(path=str(shots(tmp_path) / "console-seen-before.png"), full_page=True)


def test_retrying_an_undeliverable_from_the_page_delivers_it(bridge: Bridge, tab: Tab) -> None:
    kept, dropped = bridge.push("retry-billing", job_name="send_invoice"), bridge.push("retry-billing", job_name="x")
    assert wait_for(lambda: bridge.redis.llen(keys.UNDELIVERABLE) == 2, 20), "the two 410s make them undeliverable"
    assert [r.status for r in bridge.flaky.requests] == [410, 410]
    tab.page.goto(f"{bridge.url}/console/undeliverable")
    use_token(tab)
    row = tab.page.locator("#undeliverable tbody tr", has_text=kept)
    assert "410" in row.inner_text()
    row.locator("button.act:has-text('Retry')").click()
    result_text(tab)
    assert wait_for(lambda: [r.status for r in bridge.flaky.requests] == [410, 410, 200], 15)
    assert kept in bridge.flaky.requests[-1].body.decode()
    tab.page.goto(f"{bridge.url}/console/undeliverable")
    discard = tab.page.locator("#undeliverable tbody tr", has_text=dropped).locator("button.act:has-text('Discard')")
    discard.click()
    assert discard.inner_text() == "Discard for good?", "discarding asks for a second click"
    discard.click()
    assert "Discard" in result_text(tab)
    assert bridge.redis.llen(keys.UNDELIVERABLE) == 0
    assert len(bridge.flaky.requests) == 3, "a discarded record is not sent"


def test_actions_without_the_token_are_refused_and_the_page_says_so(bridge: Bridge, tab: Tab) -> None:
    job = bridge.push("orders-refused", job_name="ship_order")
    bridge.wait_archived("orders-refused")
    tab.page.goto(
        f"{bridge.url}/console/entry?source=dead_letter:orders-refused&id={bridge.entry_id('orders-refused', job)}"
    )
    assert "no token" in tab.page.inner_text("#token-state")
    tab.page.click("button.act:has-text('Redrive')")
    assert re.search(r"Refused \(401\b", result_text(tab))
    use_token(tab, "not-the-token")
    tab.page.click("button.act:has-text('Redrive')")
    tab.page.wait_for_selector("#action-result:has-text('Refused (403')")
    assert bridge.redis.llen("orders-refused") == 0 and len(bridge.archived("orders-refused")) == 1, "nothing moved"


def test_hostile_fields_run_no_script_in_any_page(bridge: Bridge, tab: Tab) -> None:
    queue = f"xss{SCRIPT}{IMG}"
    model = bridge.push(queue, job_id=f"xss-1{IMG}", job_name=f"xss-model{SCRIPT}", last_error=HOSTILE,
                        correlation_id=JS_URL, payload_excerpt=HOSTILE)
    hint = bridge.push(queue, job_id="xss-2", job_name=f"xss-hint{IMG}", last_error=f"TimeoutError {HOSTILE}")
    bridge.wait_archived(queue, 2)
    source = f"dead_letter:{queue}"
    from urllib.parse import quote

    pages = [
        "/console/", f"/console/source?key={quote(source, safe='')}",
        f"/console/entry?source={quote(source, safe='')}&id={bridge.entry_id(queue, model)}",
        f"/console/entry?source={quote(source, safe='')}&id={bridge.entry_id(queue, hint)}",
        "/console/groups", "/console/undeliverable", "/console/silences", "/console/audit",
        # the search page: hostile entries in its results, hostile filter values in its form, links and
        # the bulk section's filter (a JSON attribute)
        f"/console/search?source={quote(source, safe='')}",
        f"/console/search?source={quote(source, safe='')}&queue={quote(queue, safe='')}&job={quote(IMG, safe='')}",
        f"/console/search?text={quote(HOSTILE, safe='')}&fp={quote(SCRIPT, safe='')}",
    ]
    for path in pages:
        tab.page.goto(bridge.url + path)
        tab.page.wait_for_load_state("load")
        _assert_nothing_injected(tab, path)
    tab.page.goto(bridge.url + pages[2])
    assert SCRIPT in tab.page.inner_text("#title"), "the hostile title is shown, as text"
    assert JS_URL in tab.page.inner_text(".envelope")
    assert tab.dialogs == [] and tab.page_errors == [] and tab.console_errors == []


def _assert_nothing_injected(tab: Tab, path: str) -> None:
    found = tab.page.evaluate("""(runbooks) => ({
        scripts: [...document.scripts].map(s => s.getAttribute('src')),
        images: document.images.length,
        handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))
                   .filter(n => n.startsWith('on')),
        links: [...document.querySelectorAll('a[href]')].map(a => a.href)
                   .filter(h => !h.startsWith(location.origin + '/console/') && !h.startsWith(runbooks + '/')
                                && !h.startsWith(location.origin + '/api/v1/export?format=')),
    })""", RUNBOOKS)
    silences = ["/console/static/silences.js"] if path.startswith("/console/silences") else []  # the page's own
    own = ["/console/static/console.js", *silences]
    clean = {"scripts": own, "images": 0, "handlers": [], "links": []}
    assert found == clean, (path, found)


def test_search_finds_by_error_class_and_text_and_keeps_the_filter_in_the_url(bridge: Bridge, tab: Tab) -> None:
    wanted = bridge.push("search-me", last_error="LedgerLockedError: ledger 7 locked by batch nightly-close")
    bridge.push("search-me", last_error="TimeoutError: warehouse API timed out after 30s")
    bridge.wait_archived("search-me", 2)
    url = f"{bridge.url}/console/search?source=dead_letter:search-me&error=LedgerLockedError"
    assert wait_for(lambda: _search_rows(tab, url) == [wanted], 15), "the error-class filter finds the one entry"
    tab.page.goto(f"{bridge.url}/console/search")
    tab.page.fill("#search-form input[name=text]", f"nightly {HOSTILE}")
    tab.page.fill("#search-form input[name=source]", "dead_letter:search-*")
    tab.page.click("#search-form button[type=submit]")
    tab.page.wait_for_selector("#search-results")
    assert "text=nightly" in tab.page.url and "source=dead_letter%3Asearch-" in tab.page.url, "the filter is the URL"
    assert tab.page.input_value("#search-form input[name=text]") == f"nightly {HOSTILE}", "shown back as text"
    tab.page.fill("#search-form input[name=text]", "nightly")
    tab.page.click("#search-form button[type=submit]")
    tab.page.wait_for_selector("#search-results")
    assert [r.get_attribute("data-entry") for r in tab.page.query_selector_all("#search-results tbody tr")] == [
        bridge.entry_id("search-me", wanted)]


def _search_rows(tab: Tab, url: str) -> list[str]:
    tab.page.goto(url)
    return [t.split()[-1] for t in tab.page.locator("#search-results tbody tr td.job").all_inner_texts()
            if t.strip() and "Nothing" not in t]


def test_without_a_configured_token_the_pages_are_read_only(
    bridge: Bridge, tab: Tab, redis_url: str, tmp_path: Path
) -> None:
    """A second bridge on the same Redis, console on and no token: no button, and the API refuses."""
    job = bridge.push("orders-ro", job_name="ship_order")
    bridge.wait_archived("orders-ro")
    port = free_port()
    cfg = write_config(tmp_path / "ro.toml", {
        "server": {"port": port}, "redis": {"url": redis_url, "consumer_id": "console-ro"},
        "console": {"enabled": True},
    })
    proc = start_bridge(["--config", str(cfg), "run"])
    try:
        wait_healthz(port, proc)
        entry_id = bridge.entry_id("orders-ro", job)
        tab.page.goto(f"http://127.0.0.1:{port}/console/entry?source=dead_letter:orders-ro&id={entry_id}")
        assert "Read-only" in tab.page.inner_text("#read-only")
        assert tab.page.locator("button.act").count() == 0 and tab.page.locator("#token-form").count() == 0
        assert job in tab.page.inner_text(".envelope"), "read-only still shows everything"
        status = tab.page.evaluate(
            "async (url) => (await fetch(url, {method: 'POST', headers: {Authorization: 'Bearer guess'}})).status",
            f"/api/v1/entry/redrive?source=dead_letter:orders-ro&id={entry_id}",
        )
        assert status == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert len(bridge.archived("orders-ro")) == 1


def _bulk_shown(tab: Tab) -> str:
    tab.page.wait_for_selector("#bulk-confirm:not([hidden])", timeout=15000)
    return str(tab.page.inner_text("#bulk-count"))


def test_a_bulk_redrive_moves_what_the_page_showed_not_what_arrived_since(bridge: Bridge, tab: Tab) -> None:
    """The search page's "Redrive all": refused without the token; with it, the count of the page's
    snapshot, a confirmation, batches, and only those entries move, though more arrive meanwhile."""
    queue = f"redrive-bulk-{uuid.uuid4().hex[:6]}"
    shown = [bridge.push(queue, last_error="TimeoutError: bulk upstream") for _ in range(6)]
    bridge.wait_archived(queue, 6)
    url = f"{bridge.url}/console/search?queue={queue}&error=TimeoutError"
    assert wait_for(lambda: len(_search_rows(tab, url)) == 6, 15)
    tab.page.click("button.bulk-act[data-action=redrive]")
    assert re.search(r"Refused \(401\b", result_text(tab)), "no token: the API refuses and the page says so"

    use_token(tab)
    tab.page.goto(url)
    before_click = [bridge.push(queue, last_error="TimeoutError: bulk upstream") for _ in range(3)]
    bridge.wait_archived(queue, 9)
    tab.page.click("button.bulk-act[data-action=redrive]")
    assert _bulk_shown(tab).startswith("6 entries to redrive"), "the count of what the page showed"
    after_confirm = [bridge.push(queue, last_error="TimeoutError: bulk upstream") for _ in range(2)]
    bridge.wait_archived(queue, 11)
    tab.page.click("#bulk-go")
    assert "Bulk redrive: 6 of 6 done, 0 skipped" in result_text(tab)
    assert tab.page.inner_text("#bulk-state").startswith("6 of 6 processed")
    moved = sorted(json.loads(e)["job_id"] for e in bridge.redis.lrange(queue, 0, -1))
    assert moved == sorted(shown), "exactly the page's entries, once each"
    assert sorted(j["job_id"] for j in bridge.archived(queue)) == sorted(before_click + after_confirm)
    assert wait_for(lambda: all(any(e.get("event_action") == "resolve" for e in sent_to(bridge.pagerduty, j))
                                for j in shown), 20), "each redriven job's PagerDuty page is resolved"
    assert not any(e.get("event_action") == "resolve" for j in before_click + after_confirm
                   for e in sent_to(bridge.pagerduty, j))
    audit = [json.loads(a) for a in bridge.redis.lrange(keys.AUDIT, 0, 5)]
    assert (audit[0]["who"], audit[0]["action"], audit[0]["detail"][:26]) == ("alice", "bulk-redrive",
                                                                              "6 of 6 entries redriven, 0")
