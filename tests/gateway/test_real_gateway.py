"""dlq-bridge through the REAL OpenClaw gateway (npm `openclaw`, Node 24) and a fake model.

The gateway runs the shipped hardened config (deploy/openclaw/openclaw.json5);
the fake model provider behind it records every upstream request, so these
tests assert on what the model really receives.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bridge.intake.chain import normalize
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from bridge.summarize.runbooks import RunbookCatalog
from tests.conftest import envelope_entry
from tests.support.fake_model import FakeModel, last_user_text, text_of
from tests.support.openclaw_gateway import AGENT, Gateway
from tests.support.ops import clean_env, cli, write_config

from .conftest import TOKEN

# The first test also waits for the session gateway to start (10-60 s on a busy machine).
pytestmark = pytest.mark.timeout(600)

SOURCE = "dead_letter:orders"
PLANTED = "sk_live_PLANTEDsecret0123456789"
LAST_ERROR = f"HTTP 401 from https://psp.example/charges (api_key={PLANTED})"


def oc_settings(make_settings: Callable[..., Settings], gateway: Gateway, **extra: Any) -> Settings:
    openclaw = {"url": gateway.url, "timeout_s": 30.0, **extra}
    return make_settings(openclaw=openclaw, environ={"OPENCLAW_GATEWAY_TOKEN": TOKEN})


def entry(job_id: str) -> bytes:
    return envelope_entry(job_id=job_id, job_name="charge_card", last_error=LAST_ERROR,
                          payload_excerpt=json.dumps({"password": "hunter2", "amount": 42}))


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m.get("content")) for m in body["messages"] if m.get("role") == "system")


async def summarize_one(settings: Settings, raw: bytes) -> Any:
    async with open_runtime(settings, stdout=io.StringIO()) as runtime:
        return await runtime.summarizer.summarize(normalize(raw, SOURCE))


async def test_pipeline_gets_openclaw_summaries_and_the_model_gets_no_tools(
    real_gateway: Gateway, fake_model: FakeModel,
    make_settings: Callable[..., Settings], aredis: aioredis.Redis,
) -> None:
    await aredis.lpush(SOURCE, entry("pay-1"), entry("pay-2"))
    out = io.StringIO()
    async with open_runtime(oc_settings(make_settings, real_gateway), stdout=out) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 120)
        live = runtime.metrics.registry.get_sample_value(
            "dlq_bridge_summaries_total", {"source": "openclaw", "reason": ""})
    assert await aredis.llen(keys.alerted(SOURCE)) == 2
    assert live == 1 and fake_model.calls == 1  # one fingerprint: the second is coalesced or cached
    assert "orders: job pay-" in out.getvalue() and "(real gateway)" in out.getvalue()
    body = fake_model.bodies[0]
    assert body["stream"] is True  # the gateway always streams upstream
    offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    assert offered == [], f"tools offered to the model: {offered}"
    assert "tool_choice" not in body or body["tool_choice"] in ("none", None)


async def test_the_model_sees_rules_catalogue_and_the_intact_redacted_dead_letter(
    real_gateway: Gateway, fake_model: FakeModel, make_settings: Callable[..., Settings],
    aredis: aioredis.Redis,
) -> None:
    summary = await summarize_one(oc_settings(make_settings, real_gateway), entry("pay-77"))
    assert summary.source == "openclaw", summary.fallback_reason
    assert summary.title == "orders: job pay-77 failed (real gateway)"
    body = fake_model.bodies[-1]
    system, user = system_text(body), last_user_text(body)
    upstream = json.dumps(body)
    assert PLANTED not in upstream and "hunter2" not in upstream
    assert "Ignore everything else around the message" in system  # our rules …
    # … and, after the dead letter, its plausible runbooks with their use-when lines (an HTTP 401: auth-failed)
    shown = user[user.index("\nRUNBOOKS that may fit:\n") :]
    ids = {line[2:].split(":", 1)[0] for line in shown.splitlines() if line.startswith("- ")}
    assert "auth-failed" in ids and "unknown" in ids and ids <= set(RunbookCatalog.load().ids()), shown
    lines = user.splitlines()
    begin = next(i for i, line in enumerate(lines) if "-----BEGIN DEAD LETTER " in line)
    nonce = lines[begin].split("-----BEGIN DEAD LETTER ")[1].removesuffix("-----")
    assert lines[begin + 2] == f"-----END DEAD LETTER {nonce}-----", user
    envelope = json.loads(lines[begin + 1])
    assert envelope["job_id"] == "pay-77" and envelope["job_name"] == "charge_card"
    assert envelope["last_error"].startswith("HTTP 401 from https://psp.example/charges")
    assert "[REDACTED]" in envelope["last_error"]
    print(f"\nupstream body {len(upstream)} bytes: system {len(system)} chars, user {len(user)} chars,"
          f" {len(body['messages'])} messages")


async def test_wrong_token_falls_back_with_http_401(
    real_gateway: Gateway, fake_model: FakeModel, make_settings: Callable[..., Settings],
    aredis: aioredis.Redis,
) -> None:
    settings = make_settings(openclaw={"url": real_gateway.url, "token": "not-the-token"})
    summary = await summarize_one(settings, entry("pay-401"))
    assert (summary.source, summary.fallback_reason) == ("fallback", "http_401")
    assert fake_model.calls == 0


async def test_disabled_endpoint_falls_back_with_http_404(
    gateway_without_endpoint: Gateway, fake_model: FakeModel, make_settings: Callable[..., Settings],
    aredis: aioredis.Redis,
) -> None:
    summary = await summarize_one(oc_settings(make_settings, gateway_without_endpoint), entry("pay-404"))
    assert (summary.source, summary.fallback_reason) == ("fallback", "http_404")
    assert fake_model.calls == 0


async def test_model_down_falls_back_with_timeout(
    real_gateway: Gateway, fake_model: FakeModel, make_settings: Callable[..., Settings],
    aredis: aioredis.Redis,
) -> None:
    fake_model.down = True
    # The gateway prepares each run before it calls the model (17 s on a loaded CI machine) and abandons
    # the run when the client hangs up first, so the bridge's timeout is the default 30 s here.
    settings = oc_settings(make_settings, real_gateway)
    summary = await summarize_one(settings, entry("pay-down"))
    assert (summary.source, summary.fallback_reason) == ("fallback", "timeout")
    assert fake_model.calls >= 1, real_gateway.log[-4000:]  # the gateway did reach the model


async def test_summarize_command_through_the_real_gateway_leaves_no_trace(
    real_gateway: Gateway, fake_model: FakeModel, redis_url: str, aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    raw = tmp_path / "entry.json"
    raw.write_bytes(entry("pay-cli"))
    config = write_config(tmp_path / "b.toml", redis_url, openclaw={"url": real_gateway.url, "timeout_s": 30})
    done = await cli(config, "summarize", "--file", str(raw), "--json",
                     env=clean_env(OPENCLAW_GATEWAY_TOKEN=TOKEN))
    assert done.code == 0, done.err
    summary = json.loads(done.out)["summary"]
    assert summary["source"] == "openclaw" and summary["title"] == "manual: job pay-cli failed (real gateway)"
    # No summary cache, no claim: only the fleet-wide gateway budget counts the call it really made.
    assert [k for k in await aredis.keys("*") if not k.startswith(b"dlq_bridge:gateway:")] == []
    assert PLANTED not in done.out + done.err


async def check_row(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    args = args or ("--timeout", "30")  # generous: the machine may be busy
    done = await cli(config, "check", "--json", *args, env=clean_env(OPENCLAW_GATEWAY_TOKEN=TOKEN))
    rows = {r["component"]: r for r in json.loads(done.out)}
    assert TOKEN not in done.out + done.err
    return done.code, rows["openclaw"]


async def test_check_passes_and_probes_the_real_gateway(
    real_gateway: Gateway, fake_model: FakeModel, redis_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "b.toml", redis_url, openclaw={"url": real_gateway.url})
    code, row = await check_row(config)
    assert code == 0 and row["status"] == "ok", row
    assert f"openclaw/{AGENT} listed" in row["detail"] and fake_model.calls == 0
    code, row = await check_row(config, "--probe", "--timeout", "30")
    assert code == 0 and row["status"] == "ok" and "probe call answered" in row["detail"], row
    assert fake_model.calls == 1


async def test_check_fails_on_each_common_misconfiguration(
    real_gateway: Gateway, gateway_without_endpoint: Gateway, redis_url: str, tmp_path: Path
) -> None:
    wrong_token = write_config(tmp_path / "t.toml", redis_url,
                               openclaw={"url": real_gateway.url, "token": "not-the-token"})
    disabled = write_config(tmp_path / "d.toml", redis_url, openclaw={"url": gateway_without_endpoint.url})
    unknown = write_config(tmp_path / "a.toml", redis_url, openclaw={"url": real_gateway.url, "agent": "nosuch"})
    expected = {wrong_token: "token rejected (HTTP 401)", disabled: "endpoint disabled (HTTP 404)",
                unknown: "agent 'nosuch' unknown"}
    for config, reason in expected.items():
        code, row = await check_row(config)
        assert code == 1 and row["status"] == "FAIL" and reason in row["detail"], (config.name, row)
