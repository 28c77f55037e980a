"""`dlq-bridge check`: real Redis, real local HTTP servers, secrets never printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.cli import main
from tests.support.http_server import serve
from tests.support.ops import clean_env, cli, write_config
from tests.support.redis_server import free_port

SLACK_PATH = "/services/T0SECRET/B0SECRET/xoxSecretPathPart"
ROUTING_KEY = "R0UTINGKEYdoNotPrint"
WEBHOOK_SECRET = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="
GATEWAY_TOKEN = "gw-token-never-printed"


MODELS = json.dumps({"object": "list", "data": [{"id": "openclaw/dlq-summarizer"}]}).encode()


class Recorder:
    """A raw ASGI app: lists the agent at /v1/models, 404 to everything else; remembers what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        self.seen.append((scope["method"], scope["path"]))
        models = scope["method"] == "GET" and scope["path"] == "/v1/models"
        await send({"type": "http.response.start", "status": 200 if models else 404, "headers": []})
        await send({"type": "http.response.body", "body": MODELS if models else b"not here"})


def sinks(base: str) -> list[dict[str, Any]]:
    return [
        {"name": "slack-ops", "type": "slack", "url": base + SLACK_PATH},
        {"name": "pd", "type": "pagerduty", "routing_key": ROUTING_KEY,
         "events_url": base + "/v2/enqueue"},
        {"name": "incidents", "type": "webhook", "url": base + "/api/dlq?token=q",
         "secret": WEBHOOK_SECRET},
    ]


def assert_no_secrets(text: str) -> None:
    for secret in (SLACK_PATH, "B0SECRET", ROUTING_KEY, WEBHOOK_SECRET, GATEWAY_TOKEN, "token=q"):
        assert secret not in text


def rows(out: str) -> dict[str, list[str]]:
    """component -> [target, status, detail] from the printed table."""
    data = json.loads(out)
    return {r["component"]: [r["target"], r["status"], r["detail"]] for r in data}


async def test_all_reachable_exit_0_and_nothing_sent(tmp_path: Path, redis_url: str) -> None:
    recorder = Recorder()
    async with serve(recorder) as base:
        config = write_config(tmp_path / "b.toml", redis_url, sinks=sinks(base),
                              openclaw={"url": base, "token": GATEWAY_TOKEN})
        table = await cli(config, "check")
        as_json = await cli(config, "check", "--json")
    assert table.code == 0, table.out + table.err
    assert "check: all 9 components ok" in table.out
    assert_no_secrets(table.out + table.err + as_json.out + as_json.err)
    found = rows(as_json.out)
    assert found["redis"][1] == "ok" and "PONG" in found["redis"][2]
    assert found["redis memory"][1] == "ok" and found["redis memory"][2].startswith("maxmemory-policy noeviction;")
    assert found["redis memory plan"][1] == "ok" and "after 30 days" in found["redis memory plan"][2]
    assert found["sink slack-ops"][0].endswith("/****") and found["sink slack-ops"][1] == "ok"
    assert found["openclaw"][1] == "ok" and "token set" in found["openclaw"][2]
    # The gateway's model list (GET) and host roots (HEAD): no model call, no alert.
    assert set(recorder.seen) == {("GET", "/v1/models"), ("HEAD", "/")}


async def test_unreachable_sink_fails_with_exit_1(tmp_path: Path, redis_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    config = write_config(tmp_path / "b.toml", redis_url, sinks=sinks(dead)[:1])
    done = await cli(config, "check")
    assert done.code == 1
    line = next(row for row in done.out.splitlines() if row.startswith("sink slack-ops"))
    assert "FAIL" in line and "connection refused (" in line, "a refused connection is not a timeout"
    assert "check: 1 of 7 failed" in done.out
    assert_no_secrets(done.out + done.err)


async def test_unreachable_redis_fails_and_masks_password(tmp_path: Path) -> None:
    url = f"redis://:hunter2pw@127.0.0.1:{free_port()}/0"
    config = write_config(tmp_path / "b.toml", url)
    done = await cli(config, "check", "--timeout", "2")
    assert done.code == 1
    line = next(row for row in done.out.splitlines() if row.startswith("redis"))
    assert "FAIL" in line and ":****@127.0.0.1" in line
    assert "hunter2pw" not in done.out + done.err


async def test_bad_config_exits_2_with_one_line_per_problem(tmp_path: Path, redis_url: str) -> None:
    config = write_config(tmp_path / "b.toml", redis_url, server={"port": "eighty", "colour": 1})
    done = await cli(config, "check")
    assert done.code == 2
    problems = [line for line in done.err.splitlines() if line.startswith("config error:")]
    assert len(problems) == 2, done.err


async def test_secret_from_env_file_is_used_and_not_printed(tmp_path: Path, redis_url: str) -> None:
    recorder = Recorder()
    async with serve(recorder) as base:
        secret_file = tmp_path / "slack-url"
        secret_file.write_text(base + SLACK_PATH + "\n")
        config = write_config(tmp_path / "b.toml", redis_url,
                              sinks=[{"name": "slack-ops", "type": "slack", "url_env": "SLACK_WEBHOOK_URL"}])
        done = await cli(config, "check", env=clean_env(SLACK_WEBHOOK_URL_FILE=str(secret_file)))
    assert done.code == 0, done.out + done.err
    assert_no_secrets(done.out + done.err)
    assert recorder.seen == [("HEAD", "/")]


async def test_help_lists_examples_and_exit_codes(tmp_path: Path, redis_url: str) -> None:
    config = write_config(tmp_path / "b.toml", redis_url)
    done = await cli(config, "check", "--help")
    assert done.code == 0
    assert "examples:" in done.out and "exit codes: 0" in done.out


@pytest.mark.parametrize("command", ["check", "peek", "redrive"])
def test_every_ops_command_documents_examples_and_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"dlq-bridge {command}" in out
    assert "exit codes: 0" in out and " 1 " in out and " 2 " in out


@pytest.mark.parametrize("args", [["peek"], ["peek", "orders"], ["redrive", "orders"]])
def test_unreachable_redis_exits_1_without_a_traceback(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "b.toml", f"redis://:pw-secret@127.0.0.1:{free_port()}/0")
    assert main(["--config", str(config), *args]) == 1
    captured = capsys.readouterr()
    assert "Redis error" in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err and "pw-secret" not in captured.out + captured.err


def test_mask_url_keeps_only_scheme_host_and_port() -> None:
    from bridge.commands.common import mask_url

    assert mask_url("https://hooks.slack.com/services/T0/B0/xyz") == "https://hooks.slack.com/****"
    assert mask_url("https://events.pagerduty.com/v2/enqueue?k=1") == "https://events.pagerduty.com/****"
    assert mask_url("https://user:pw@api.internal:8443/") == "https://user:****@api.internal:8443"
    assert mask_url("redis://:pw@10.0.0.1:6379/3", keep_path=True) == "redis://:****@10.0.0.1:6379/3"
    assert mask_url("rediss://default:pw@[::1]:6380/0", keep_path=True) == "rediss://default:****@[::1]:6380/0"
    assert mask_url("unix:///run/redis.sock") == "unix:///run/redis.sock"
