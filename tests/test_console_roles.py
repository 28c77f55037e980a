"""Console roles through the real API, runtime and Redis: role tokens, the old single token, trusted proxy.

docs/design.md, "Console roles": viewer reads; operator redrives, retries and
silences (and expires its own silences); admin also discards and expires
anyone's silence. A 403 names the role needed.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from bridge.commands import console_token
from bridge.config.console_auth import ConsoleAuthSettings, ProxySettings, RoleToken
from bridge.console.session import Signer
from bridge.settings import Settings
from tests.conftest import envelope_entry
from tests.support.receiver import Reply
from tests.test_console_api import AUTH, rig

SECRET = "s" * 40


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def role_token(name: str, role: str, token: str) -> RoleToken:
    return RoleToken.model_validate({"name": name, "role": role, "sha256": hashlib.sha256(token.encode()).hexdigest()})


ROLE_TOKENS = ConsoleAuthSettings(tokens=[
    role_token("vera", "viewer", "viewer-token"),
    role_token("otto", "operator", "operator-token"),
    role_token("otto", "operator", "operator-token-new"),  # rotation: old and new are both good until one goes
    role_token("ada", "admin", "admin-token"),
])


async def _entry_id(api: httpx.AsyncClient, headers: dict[str, str] | None = None) -> str:
    page = (await api.get("/api/v1/entries", params={"source": "dead_letter:orders"}, headers=headers)).json()
    return str(page["entries"][0]["id"])


async def test_each_role_may_do_its_actions_and_a_refusal_names_the_role_needed(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"), envelope_entry(job_id="o2"))
    async with rig(make_settings, auth=ROLE_TOKENS, hook_reply=Reply(410)) as r:
        await r.drain()
        entry = {"source": "dead_letter:orders", "id": await _entry_id(r.api)}
        viewer_reads = await r.api.get("/api/v1/overview", headers=bearer("viewer-token"))
        viewer_redrive = await r.api.post("/api/v1/entry/redrive", params=entry, headers=bearer("viewer-token"))
        viewer_silence = await r.api.post("/api/v1/silences", headers=bearer("viewer-token"),
                                          json={"queue": "x", "duration_s": 60})
        operator_redrive = await r.api.post("/api/v1/entry/redrive", params=entry,
                                            headers=bearer("operator-token-new"))
        records = (await r.api.get("/api/v1/undeliverable")).json()
        viewer_retry = await r.api.post(f"/api/v1/undeliverable/{records[0]['id']}/retry",
                                        headers=bearer("viewer-token"))
        operator_retry = await r.api.post(f"/api/v1/undeliverable/{records[0]['id']}/retry",
                                          headers=bearer("operator-token"))
        records = (await r.api.get("/api/v1/undeliverable")).json()  # the hook refused again: a new record
        operator_discard = await r.api.delete(f"/api/v1/undeliverable/{records[0]['id']}",
                                              headers=bearer("operator-token"))
        admin_discard = await r.api.delete(f"/api/v1/undeliverable/{records[0]['id']}", headers=bearer("admin-token"))
        whoami = {t: (await r.api.get("/api/v1/whoami", headers=bearer(t))).json()
                  for t in ("viewer-token", "operator-token", "admin-token")}
        audit = [(a["who"], a["action"], a["outcome"]) for a in (await r.api.get("/api/v1/audit")).json()]
    assert viewer_reads.status_code == 200
    assert viewer_redrive.status_code == 403
    assert viewer_redrive.json()["detail"] == "this needs the operator role (you have viewer)"
    assert viewer_silence.status_code == 403 and "operator" in viewer_silence.json()["detail"]
    assert operator_redrive.status_code == 200 and operator_redrive.json()["ok"] is True
    assert viewer_retry.status_code == 403 and "operator" in viewer_retry.json()["detail"]
    assert operator_retry.status_code in (200, 409) and operator_retry.json()["action"] == "retry", (
        "the operator may retry (the sink answering 410 again is a refusal by the sink, not the role)")
    assert operator_discard.status_code == 403
    assert operator_discard.json()["detail"] == "this needs the admin role (you have operator)"
    assert admin_discard.status_code == 200
    assert audit == [("ada", "discard", "ok"), ("otto", "retry", audit[1][2]), ("otto", "redrive", "ok")], (
        "who is the token's name; role refusals are not audited")
    assert whoami["viewer-token"]["may"] == ["export", "read"]
    assert "discard" not in whoami["operator-token"]["may"] and "redrive" in whoami["operator-token"]["may"]
    assert whoami["admin-token"]["role"] == "admin" and "expire-silence" in whoami["admin-token"]["may"]


async def test_an_operator_expires_its_own_silence_but_only_an_admin_expires_another_s(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    async with rig(make_settings, auth=ROLE_TOKENS) as r:
        mine = (await r.api.post("/api/v1/silences", headers=bearer("operator-token"),
                                 json={"queue": "a", "duration_s": 60})).json()
        theirs = (await r.api.post("/api/v1/silences", headers=bearer("admin-token"),
                                   json={"queue": "b", "duration_s": 60, "author": "mallory"})).json()
        own = await r.api.delete(f"/api/v1/silences/{mine['id']}", headers=bearer("operator-token"))
        other = await r.api.delete(f"/api/v1/silences/{theirs['id']}", headers=bearer("operator-token"))
        admin = await r.api.delete(f"/api/v1/silences/{theirs['id']}", headers=bearer("admin-token"))
    assert mine["author"] == "otto" and theirs["author"] == "ada", "a named token's author is its name"
    assert own.status_code == 200
    assert other.status_code == 403 and "admin role" in other.json()["detail"] and "ada's" in other.json()["detail"]
    assert admin.status_code == 200


async def test_the_single_token_is_still_an_admin_and_a_wrong_or_removed_token_is_refused(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    rotated = ConsoleAuthSettings(tokens=[t for t in ROLE_TOKENS.tokens if t.name != "otto"]
                                  + [role_token("otto", "operator", "operator-token-new")])
    async with rig(make_settings, auth=rotated, hook_reply=Reply(410)) as r:
        await r.drain()
        record = (await r.api.get("/api/v1/undeliverable")).json()[0]
        old = await r.api.post(f"/api/v1/undeliverable/{record['id']}/retry", headers=bearer("operator-token"))
        legacy = await r.api.delete(f"/api/v1/undeliverable/{record['id']}", headers=AUTH)
        legacy_role = (await r.api.get("/api/v1/whoami", headers=AUTH)).json()
    assert old.status_code == 403 and old.json()["detail"] == "wrong console token"
    assert legacy.status_code == 200 and legacy_role["role"] == "admin"


async def test_anonymous_none_closes_the_reads(make_settings: Callable[..., Settings], aredis: aioredis.Redis) -> None:
    closed = ROLE_TOKENS.model_copy(update={"anonymous": "none"})
    async with rig(make_settings, auth=closed) as r:
        nobody = await r.api.get("/api/v1/overview")
        viewer = await r.api.get("/api/v1/overview", headers=bearer("viewer-token"))
    assert nobody.status_code == 401 and "viewer role" in nobody.json()["detail"]
    assert viewer.status_code == 200


def _proxy(addresses: list[str]) -> ConsoleAuthSettings:
    return ConsoleAuthSettings(anonymous="none", proxy=ProxySettings(addresses=addresses),
                               groups={"viewer": ["staff"], "operator": ["sre"]},
                               session_secret=SecretStr(SECRET))


async def test_proxy_headers_count_only_from_the_configured_proxy_and_actions_need_the_csrf_token(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    sre = {"X-Forwarded-User": "sam", "X-Forwarded-Groups": "staff, sre"}
    csrf = {"X-CSRF-Token": Signer(SECRET).csrf_for("sam")}
    async with rig(make_settings, auth=_proxy(["10.0.0.0/8"])) as r:  # the test client is 127.0.0.1
        spoofed = await r.api.get("/api/v1/overview", headers=sre)
    async with rig(make_settings, auth=_proxy(["127.0.0.1/32"])) as r:
        await r.drain()
        entry = {"source": "dead_letter:orders", "id": await _entry_id(r.api, sre)}
        me = (await r.api.get("/api/v1/whoami", headers=sre)).json()
        staff = (await r.api.get("/api/v1/whoami", headers={"X-Forwarded-User": "sue",
                                                            "X-Forwarded-Groups": "staff"})).json()
        no_csrf = await r.api.post("/api/v1/entry/redrive", params=entry, headers=sre)
        done = await r.api.post("/api/v1/entry/redrive", params=entry, headers={**sre, **csrf})
        audit = (await r.api.get("/api/v1/audit", headers=sre)).json()
    assert spoofed.status_code == 401, "identity headers from an unlisted address are ignored"
    assert (me["name"], me["role"], me["via"]) == ("sam", "operator", "proxy")
    assert staff["role"] == "viewer"
    assert no_csrf.status_code == 403 and "X-CSRF-Token" in no_csrf.json()["detail"]
    assert done.status_code == 200 and [a["who"] for a in audit] == ["sam"]


def test_sessions_and_proxy_need_a_signing_secret() -> None:
    with pytest.raises(ValueError, match="session_secret"):
        ConsoleAuthSettings(proxy=ProxySettings(addresses=["127.0.0.1"]))


def test_console_token_prints_a_token_whose_hash_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    console_token.run(None, argparse.Namespace(role="operator", name="alice"))  # type: ignore[arg-type]
    out = capsys.readouterr().out
    token = out.split("shown once): ", 1)[1].split()[0]
    assert f'sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"' in out
    assert 'role = "operator"' in out and 'name = "alice"' in out
