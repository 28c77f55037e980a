"""The Alertmanager sink against a real Alertmanager, whose receiver is a webhook of the test's own."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI
from pydantic import SecretStr

from bridge.app import build_console
from bridge.console.api import build_api
from bridge.console.auth import Authenticator
from bridge.core.errors import SinkPermanent
from bridge.core.models import Alert, Notification
from bridge.core.resolves import Resolve, incident_key
from bridge.delivery.assembly import build_routes
from bridge.intake.cause import cause_key
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.sinks.alertmanager import AlertmanagerSink, matcher
from bridge.sources.leaving import leave_note
from tests.conftest import envelope_entry
from tests.sinks.runtime_contract import RuntimeContract
from tests.sinks.test_sink_contract import HttpSinkContract
from tests.support.alertmanager import alertmanager
from tests.support.http_server import serve
from tests.support.ops import cli
from tests.support.peers import INSTALL_HINT
from tests.support.receiver import Receiver, make_alert

pytestmark = pytest.mark.slow


@dataclass
class Peer:
    am: str  # Alertmanager's base URL
    hook: Receiver  # what Alertmanager notified
    http: httpx.AsyncClient
    sink: AlertmanagerSink

    def notifications(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.hook.requests]

    def alerts(self, status: str = "firing") -> list[dict[str, Any]]:
        return [a for n in self.notifications() for a in n["alerts"] if a["status"] == status]

    async def until(self, done: Callable[[], bool], timeout_s: float = 15.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not done():
            assert asyncio.get_running_loop().time() < deadline, f"timed out; got {self.notifications()}"
            await asyncio.sleep(0.1)


@pytest.fixture
async def peer(tmp_path: Path) -> AsyncIterator[Peer]:
    hook = Receiver()
    async with serve(hook.app) as base, httpx.AsyncClient() as http:
        with alertmanager(tmp_path, f"{base}/am") as am:
            yield Peer(am, hook, http, AlertmanagerSink("am", am, http, timeout_s=5.0))


async def test_an_alert_arrives_at_the_receiver_with_our_labels(peer: Peer) -> None:
    alert = make_alert(job_id="job-1", runbook_url="https://runbooks.example/timeouts", fingerprint="fp1")
    await peer.sink.send(alert)
    await peer.until(lambda: bool(peer.alerts()))
    [got] = peer.alerts()
    assert got["labels"] == {
        "alertname": "DeadLetter", "queue": "orders", "job_name": "ship_order", "severity": "error",
        "source": "dead_letter:orders", "fingerprint": "fp1", "job_id": "job-1",
    }
    notes = got["annotations"]
    assert notes["summary"] == "ship_order failed on orders (queue orders, job job-1)"
    assert "The warehouse API timed out." in notes["description"] and "Redrive the job" in notes["description"]
    assert notes["runbook_url"] == "https://runbooks.example/timeouts"
    assert got["startsAt"].startswith("2026-11-30T00:00:00")  # the job's first_failed_at
    [held] = (await peer.http.get(f"{peer.am}/api/v2/alerts")).json()  # a webhook shows no endsAt while firing
    ends = datetime.fromisoformat(held["endsAt"].replace("Z", "+00:00"))
    assert ends > datetime.now(UTC) + timedelta(hours=23)  # resolve_after_s: a day by default


async def test_alertmanager_grouping_collapses_a_storm_into_few_notifications(peer: Peer) -> None:
    storm = [make_alert(queue="orders", job_id=f"job-{i}", fingerprint="same-cause") for i in range(60)]
    await asyncio.gather(*(peer.sink.send(a) for a in storm))
    await peer.until(lambda: len({a["labels"]["job_id"] for a in peer.alerts()}) == 60)
    notifications = peer.notifications()
    sizes = [len(n["alerts"]) for n in notifications]
    assert len(notifications) <= 10 and sizes[-1] == 60, sizes  # one group, re-sent while it grew
    assert {n["groupLabels"]["fingerprint"] for n in notifications} == {"same-cause"}


async def test_a_redrive_resolves_the_alert(peer: Peer) -> None:
    alert = make_alert(queue="orders", job_id="job-9")
    other = make_alert(queue="orders", job_id="job-10")
    await peer.sink.send(alert)
    await peer.sink.send(other)
    await peer.until(lambda: len(peer.alerts()) >= 2)
    dl = alert.dead_letter
    await peer.sink.send_resolve(Resolve(
        dedup_key=incident_key(dl.job_id), idempotency_key=dl.idempotency_key, digest=dl.raw_digest,
        fingerprint=dl.fingerprint, queue=dl.queue,
    ))
    await peer.until(lambda: bool(peer.alerts("resolved")))
    [gone] = peer.alerts("resolved")
    assert gone["labels"]["job_id"] == "job-9"  # only the redriven job
    held = (await peer.http.get(f"{peer.am}/api/v2/alerts", params={"filter": matcher("queue", "orders")})).json()
    assert [a["labels"]["job_id"] for a in held] == ["job-10"]


def group_of(count: int, sequence: int, first: Alert) -> Notification:
    queues = ["orders", "billing"]
    return Notification(
        sink="am", group_key="cause:error:timeout", kind="digest", sequence=sequence, count=count,
        new_count=count if sequence == 1 else 2, previous_at=None if sequence == 1 else 1_764_500_000.0,
        first_seen=1_764_499_990.0, last_seen=1_764_500_060.0, queues=queues,
        queue_counts={"orders": 1, "billing": count - 1}, sample_job_ids=[], severity=first.severity, first=first,
        opened_at=1_764_499_990.0,
    )


async def test_a_group_is_one_alert_resolved_once_its_last_job_left_like_pagerdutys_incident(peer: Peer) -> None:
    """A grouped sink: every digest updates the group's one alert (the first job's `job_id`); the resolve
    that closes the group (sent once its last job left, maybe of another queue) ends it."""
    sink = AlertmanagerSink("am", peer.am, peer.http, timeout_s=5.0, grouped=True)
    first = make_alert(queue="orders", job_id="job-1", fingerprint="timeout")
    await sink.send_group(group_of(3, 1, first))
    await sink.send_group(group_of(5, 2, first))
    await peer.sink.send(make_alert(queue="billing", job_id="other-1", fingerprint="other"))
    cause = cause_key(first.dead_letter.last_error)
    held = (await peer.http.get(f"{peer.am}/api/v2/alerts", params={"filter": matcher("cause", cause)}))
    [group] = held.json()  # both digests are one alert
    assert group["labels"]["job_id"] == "job-1" and group["annotations"]["count"] == "5"
    assert not {"queue", "job_name", "source", "fingerprint"} & set(group["labels"]), (
        "a cause group's labels are its cause's, never its first job's queue (any queue's job can come first)")
    await sink.send_resolve(Resolve(dedup_key=sink.group_dedup_key(first), idempotency_key="billing:job-5",
                                    queue="billing", fingerprint="timeout", cause="timeout"))
    await peer.until(lambda: bool(peer.alerts("resolved")))
    [gone] = peer.alerts("resolved")
    assert gone["labels"]["job_id"] == "job-1" and gone["labels"]["cause"] == cause
    left = (await peer.http.get(f"{peer.am}/api/v2/alerts", params={"active": "true"})).json()
    assert [a["labels"]["job_id"] for a in left if a["status"]["state"] == "active"] == ["other-1"]


async def test_a_resolve_of_an_alert_alertmanager_never_had_sends_nothing(peer: Peer) -> None:
    await peer.sink.send_resolve(Resolve(dedup_key="never-alerted", idempotency_key="orders:never-alerted"))
    assert (await peer.http.get(f"{peer.am}/api/v2/alerts")).json() == []


async def test_an_alertmanager_silence_holds_the_alert_back(peer: Peer) -> None:
    now = datetime.now(UTC)
    silence = {
        "matchers": [{"name": "queue", "value": "billing", "isRegex": False, "isEqual": True}],
        "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat(),
        "createdBy": "test", "comment": "billing maintenance",
    }
    created = await peer.http.post(f"{peer.am}/api/v2/silences", json=silence)
    silence_id = created.json()["silenceID"]
    await peer.sink.send(make_alert(queue="billing", job_id="b-1"))
    await peer.sink.send(make_alert(queue="orders", job_id="o-1"))
    await peer.until(lambda: any(a["labels"]["queue"] == "orders" for a in peer.alerts()))
    await asyncio.sleep(2.5)  # two more group intervals: a billing notification would have gone out
    assert all(a["labels"]["queue"] != "billing" for a in peer.alerts())
    [held] = (await peer.http.get(f"{peer.am}/api/v2/alerts", params={"filter": matcher("queue", "billing")})).json()
    assert held["status"]["state"] == "suppressed" and held["status"]["silencedBy"] == [silence_id]


async def test_a_rejected_alert_is_permanent_and_names_no_secret(tmp_path: Path) -> None:
    token = SecretStr("am-bearer-token-0123456789")
    hook = Receiver()
    async with serve(hook.app) as base, httpx.AsyncClient() as http:
        with alertmanager(tmp_path, f"{base}/am") as am:
            sink = AlertmanagerSink("am", am, http, bearer_token=token, active_s=-3600.0)  # ends before it starts
            with pytest.raises(SinkPermanent) as caught:
                await sink.send(make_alert(first_failed_at=datetime.now(UTC).isoformat()))
    assert caught.value.status == 400
    assert token.get_secret_value() not in str(caught.value) + caught.value.detail


class TestAlertmanagerContract(HttpSinkContract):
    """Against a receiver answering as Alertmanager would: its 400s and 5xx, scripted."""

    type = "alertmanager"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"url": base_url}

    def sent_body(self, body: Any) -> dict[str, Any]:
        """One alert per request; `endsAt` is stamped per attempt, so `render` leaves it out."""
        [alert] = body
        assert alert.pop("endsAt")
        return dict(alert)


class AlertmanagerPeer:
    """The real Alertmanager; what it took is what its API v2 holds."""

    scripted_failures = False
    token = "am-bearer-token-contract-0001"

    def __init__(self, am: str, http: httpx.AsyncClient) -> None:
        self.am, self.http = am, http
        self.secrets = [self.token]

    def table(self, **extra: Any) -> dict[str, Any]:
        return {"name": "am", "type": "alertmanager", "url": self.am, "bearer_token": self.token, **extra}

    async def received(self) -> list[str]:
        return [json.dumps(a) for a in (await self.http.get(f"{self.am}/api/v2/alerts")).json()]

    def fail_next(self, failure: str) -> None:
        raise NotImplementedError


class TestAlertmanagerRuntimeContract(RuntimeContract):
    type_name = "alertmanager"

    @pytest.fixture
    async def peer(self, tmp_path: Path) -> AsyncIterator[AlertmanagerPeer]:
        hook = Receiver()
        async with serve(hook.app) as base, httpx.AsyncClient() as http:
            with alertmanager(tmp_path, f"{base}/am") as am:
                yield AlertmanagerPeer(am, http)


async def test_a_console_redrive_through_the_runtime_resolves_the_alert_and_the_console_shows_the_sink(
    peer: Peer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    token = "console-token-am"
    settings = make_settings(
        {"DLQ_BRIDGE_CONSOLE_TOKEN": token}, console={"enabled": True},
        delivery={"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 5.0},
        sinks=[{"name": "am", "type": "alertmanager", "url": peer.am}],
    )
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    auth = {"Authorization": f"Bearer {token}", "X-Console-User": "alice"}
    async with open_runtime(settings) as runtime:
        app = FastAPI()
        app.state.console = build_console(runtime)
        app.state.console_auth = Authenticator(runtime.settings.console.token, runtime.settings.console.auth)
        app.include_router(build_api())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as api:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
            await peer.until(lambda: bool(peer.alerts()))
            overview = (await api.get("/api/v1/overview")).json()
            entry = (await api.get("/api/v1/entries", params={"source": "dead_letter:orders"})).json()["entries"][0]
            done = await api.post("/api/v1/entry/redrive", headers=auth,
                                  params={"source": "dead_letter:orders", "id": entry["id"]})
            assert done.status_code == 200, done.text
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
            await peer.until(lambda: bool(peer.alerts("resolved")))
    assert [(s["name"], s["type"], s["queue_depth"]) for s in overview["sinks"]] == [("am", "alertmanager", 0)]
    assert done.json()["ok"] is True and "resolves queued for am" in done.json()["message"]
    [gone] = peer.alerts("resolved")
    assert gone["labels"]["job_id"] == "o1" and gone["labels"]["queue"] == "orders"


async def test_a_shell_redrive_resolves_the_alert_as_the_console_does(
    peer: Peer, make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    """Issue 34: `dlq-bridge redrive` on a running bridge closes the Alertmanager alert too."""
    settings = make_settings(delivery={"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 5.0},
                             sinks=[{"name": "am", "type": "alertmanager", "url": peer.am}])
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    async with open_runtime(settings) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
        await peer.until(lambda: bool(peer.alerts()))
        done = await cli(tmp_path / "bridge.toml", "redrive", "orders", "--job-id", "o1")
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
        await peer.until(lambda: bool(peer.alerts("resolved")))
    assert done.code == 0 and done.out.endswith("; resolves queued for am\n"), done
    [gone] = peer.alerts("resolved")
    assert gone["labels"]["job_id"] == "o1"


def test_the_route_snippet_in_docs_sinks_md_is_a_valid_alertmanager_config(tmp_path: Path) -> None:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip(f"amtool is not installed (Debian's prometheus-alertmanager: {INSTALL_HINT})")
    docs = (Path(__file__).resolve().parents[1] / "docs" / "sinks.md").read_text()
    [route] = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    config = tmp_path / "route.yml"
    config.write_text(route + "receivers:\n  - name: chat\n  - name: pager\n")
    checked = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 inhibit rules" in checked.stdout


async def test_a_watched_job_leaving_its_store_is_held_for_the_alertmanager_sink_like_pagerduty(
    make_settings: Callable[..., Settings],
) -> None:
    """The leave check holds a watched job for every routed sink whose plug-in resolves: the same moments."""
    settings = make_settings(sinks=[
        {"name": "am", "type": "alertmanager", "url": "http://127.0.0.1:9"},
        {"name": "am-off", "type": "alertmanager", "url": "http://127.0.0.1:9", "resolve_on_retry": False},
        {"name": "pd", "type": "pagerduty", "routing_key": "rk", "events_url": "http://127.0.0.1:9/e"},
        {"name": "teams", "type": "teams", "url": "http://127.0.0.1:9/t"},
    ])
    async with httpx.AsyncClient() as http:
        routes = build_routes(settings, http)
    alert = make_alert(job_id="jid-1")
    note = leave_note(alert, routes)
    assert note is not None and note.sinks == ("am", "pd")
    assert note.resolve.dedup_key == "jid-1" and note.resolve.queue == "orders"
