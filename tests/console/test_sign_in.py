"""Sign-in with OpenID Connect in real Chromium, against a real provider (npm's oidc-provider) and a real bridge.

The provider runs on 127.0.0.1 and the console is opened as `localhost`: two
sites, as a company's identity provider and its console are, so the
`SameSite` handling of the session and sign-in cookies is really exercised.
vera (group `staff`) is a viewer, otto (`sre`) an operator.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from bridge.stores import keys
from tests.support.bridge_process import start_bridge, wait_for, wait_healthz
from tests.support.browser import Tab, browser_missing
from tests.support.http_server import ThreadedServer
from tests.support.oidc_provider import CLIENT_ID, Provider, oidc_provider, provider_missing
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

MISSING = browser_missing() or provider_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=str(MISSING))]

SECRET = "session-" + uuid.uuid4().hex


@dataclass
class SignedIn:
    url: str
    provider: Provider
    redis: redis.Redis

    def push(self, queue: str) -> str:
        job_id = f"{queue}-{uuid.uuid4().hex[:8]}"
        self.redis.lpush(f"dead_letter:{queue}", json.dumps({"job_id": job_id, "job_name": "charge_card",
                                                             "last_error": "TimeoutError: upstream", "attempts": 3}))
        return job_id

    def entry_id(self, queue: str, job_id: str) -> str:
        for raw in self.redis.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1):
            if json.loads(raw).get("job_id") == job_id:
                return hashlib.sha256(raw).hexdigest()[:16]
        raise AssertionError(f"{job_id} is not archived")


def _config(redis_url: str, port: int, issuer: str, hook: str) -> str:
    return f"""
[server]
port = {port}
[redis]
url = "{redis_url}"
consumer_id = "sign-in-1"
[sources]
rescan_interval_s = 0.2
[[sinks]]
name = "hook"
type = "webhook"
url = "{hook}/hook"
secret = "s"
[console]
enabled = true
[console.auth]
anonymous = "none"
session_secret_env = "CONSOLE_SESSION_SECRET"
groups = {{ viewer = ["staff"], operator = ["sre"], admin = ["sre-leads"] }}
[console.auth.oidc]
issuer = "{issuer}"
client_id = "{CLIENT_ID}"
redirect_url = "http://localhost:{port}/console/auth/callback"
scopes = ["openid"]
"""


@pytest.fixture(scope="module")
def signed_in(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignedIn]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    port = free_port()
    hook = Receiver()
    with ThreadedServer(hook.app) as wh, oidc_provider(f"http://localhost:{port}/console/auth/callback") as idp:
        cfg = tmp_path_factory.mktemp("sign-in") / "bridge.toml"
        cfg.write_text(_config(redis_url, port, idp.issuer, wh.url))
        proc = start_bridge(["--config", str(cfg), "run"], env={"CONSOLE_SESSION_SECRET": SECRET})
        try:
            wait_healthz(port, proc)
            yield SignedIn(f"http://localhost:{port}", idp, client)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            client.flushdb()
            client.close()


def sign_in_at_provider(tab: Tab, provider: Provider, user: str) -> None:
    """The provider's own login form, then its consent form (oidc-provider's development pages)."""
    page = tab.page
    page.wait_for_url(f"{provider.issuer}/interaction/**", timeout=15000)
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    if page.url.startswith(provider.issuer + "/interaction/"):  # the consent page
        page.click("button[type=submit]")
    page.wait_for_selector("#signed-in", timeout=15000)


def result_text(tab: Tab) -> str:
    tab.page.wait_for_selector("#action-result:not([hidden])", timeout=15000)
    return str(tab.page.inner_text("#action-result"))


def session_cookie(tab: Tab) -> dict[str, Any]:
    found = [c for c in tab.page.context.cookies() if c["name"] == "dlqb_session"]
    assert len(found) == 1, found
    return dict(found[0])


def test_sign_in_as_viewer_is_refused_a_redrive_then_as_operator_redrives_and_signs_out(
    signed_in: SignedIn, tab: Tab
) -> None:
    job = signed_in.push("sign-in-orders")
    assert wait_for(lambda: signed_in.redis.llen(keys.alerted("dead_letter:sign-in-orders")) == 1, 20)
    entry = f"/console/entry?source=dead_letter:sign-in-orders&id={signed_in.entry_id('sign-in-orders', job)}"

    tab.page.goto(signed_in.url + entry)  # nobody: sent to the provider
    sign_in_at_provider(tab, signed_in.provider, "vera")
    assert tab.page.url == signed_in.url + entry, "back on the page asked for"
    assert tab.page.inner_text("#signed-in") == "vera · viewer"
    cookie = session_cookie(tab)
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["expires"] > time.time()
    tab.page.click("button.act:has-text('Redrive')")
    refused = result_text(tab)
    assert "403" in refused and "needs the operator role (you have viewer)" in refused
    assert signed_in.redis.llen("sign-in-orders") == 0, "nothing moved"

    tab.page.click("#sign-out")
    tab.page.click("#sign-in-again")  # asks the provider for a fresh login, not vera's session there
    sign_in_at_provider(tab, signed_in.provider, "otto")
    tab.page.goto(signed_in.url + entry)
    assert tab.page.inner_text("#signed-in") == "otto · operator"
    tab.page.click("button.act:has-text('Redrive')")
    assert "moved to" in result_text(tab)
    moved = [json.loads(e)["job_id"] for e in signed_in.redis.lrange("sign-in-orders", 0, -1)]
    assert moved == [job], "the operator's redrive put the job back on its work queue"
    audit = [json.loads(a) for a in signed_in.redis.lrange(keys.AUDIT, 0, -1)]
    assert [(a["who"], a["action"], a["outcome"]) for a in audit][:1] == [("otto", "redrive", "ok")]

    tab.page.click("#sign-out")
    tab.page.wait_for_selector("#sign-in-again")
    assert not [c for c in tab.page.context.cookies() if c["name"] == "dlqb_session"], "signed out: no session"
    answer = tab.page.goto(signed_in.url + "/api/v1/whoami")
    assert answer is not None and answer.status == 401


def test_an_action_with_the_session_cookie_but_without_the_csrf_token_is_refused(
    signed_in: SignedIn, tab: Tab
) -> None:
    tab.page.goto(signed_in.url + "/console/silences")
    sign_in_at_provider(tab, signed_in.provider, "otto")
    status = tab.page.evaluate("""async () => {
        const r = await fetch('/api/v1/silences', {method: 'POST', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json'}, body: JSON.stringify({queue: 'x', duration_s: 60})});
        return [r.status, (await r.json()).detail];
    }""")
    assert status[0] == 403 and "X-CSRF-Token" in status[1]
