from __future__ import annotations

from pathlib import Path

import pytest

from bridge.cli import main
from bridge.errors import ConfigError
from bridge.models import Severity
from bridge.settings import SlackSinkSettings, WebhookSinkSettings, load_settings

FULL = """
[server]
host = "0.0.0.0"
port = 9000

[redis]
url = "redis://127.0.0.1:6379/0"
consumer_id = "bridge-1"

[severity]
default = "warning"
"payments*" = "critical"

[[sinks]]
name = "slack-ops"
type = "slack"
url_env = "SLACK_WEBHOOK_URL"
min_severity = "warning"

[[sinks]]
name = "incidents"
type = "webhook"
url = "https://incidents.internal/api/dlq"
secret_file = "SECRET_PATH"
queues = ["payments*"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bridge.toml"
    path.write_text(text)
    return path


def test_full_file_loads_with_secrets_from_env_and_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw rotated-old\n")
    path = write(tmp_path, FULL.replace("SECRET_PATH", str(secret)))
    s = load_settings(path, {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/X"})
    slack, hook = s.sinks
    assert isinstance(slack, SlackSinkSettings) and isinstance(hook, WebhookSinkSettings)
    assert slack.url is not None and slack.url.get_secret_value().endswith("/T/B/X")
    assert "hooks.slack.com" not in repr(s)
    assert hook.signing_secrets() == ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "rotated-old"]
    assert s.severity_for("payments-eu") is Severity.CRITICAL
    assert s.severity_for("emails") is Severity.WARNING
    assert hook.routes("payments-eu", Severity.INFO) and not hook.routes("emails", Severity.CRITICAL)
    assert not slack.routes("emails", Severity.INFO)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nport = 9000\n")
    s = load_settings(path, {"DLQ_BRIDGE_SERVER__PORT": "9100", "DLQ_BRIDGE_REDIS__CONSUMER_ID": "pod-a"})
    assert s.server.port == 9100
    assert s.redis.consumer_id == "pod-a"


def test_secret_from_env_file_convention(tmp_path: Path) -> None:
    secret = tmp_path / "url"
    secret.write_text("https://hooks.slack.com/services/T/B/FROMFILE")
    path = write(tmp_path, '[[sinks]]\nname = "s"\ntype = "slack"\nurl_env = "SLACK_URL"\n')
    s = load_settings(path, {"SLACK_URL_FILE": str(secret)})
    assert s.sinks[0].url.get_secret_value().endswith("FROMFILE")  # type: ignore[union-attr]


def test_every_problem_is_reported_once_without_secrets(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[server]
port = "eighty"
[redis]
urll = "redis://x"
[openclaw]
url = "not a url"
[[sinks]]
name = "slack-ops"
type = "slack"
url_env = "MISSING_SLACK_URL"
[[sinks]]
name = "pd"
type = "pagerduty"
routing_key = "R0UT1NGKEY-SECRET"
events_url = "ftp://x"
""",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path, {})
    problems = info.value.problems
    text = "\n".join(problems)
    assert any(p.startswith("server.port:") for p in problems)
    assert "redis.urll: unknown key" in problems
    assert any("openclaw.url" in p for p in problems)
    assert any("MISSING_SLACK_URL" in p and "not set" in p for p in problems)
    assert any("events_url" in p for p in problems)
    assert "R0UT1NGKEY-SECRET" not in text


def test_cli_prints_one_line_per_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "[server]\nport = -1\nbogus = 1\n")
    assert main(["--config", str(path), "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert all(line.startswith("config error: server.") for line in err)
    assert "Traceback" not in "".join(err)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", {})


def test_zero_configuration_uses_console_sink() -> None:
    s = load_settings(None, {})
    assert s.redis.url is None
    assert s.openclaw is None
    assert [sink.type for sink in s.effective_sinks()] == ["console"]
