from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.core.errors import ConfigError
from bridge.core.models import Severity
from bridge.settings import (
    Settings,
    SlackSinkSettings,
    WebhookSinkSettings,
    load_settings,
    unknown_env_variables,
)

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


def test_a_token_file_alone_is_enough_without_the_default_variable(tmp_path: Path) -> None:
    """`[openclaw] token_file` as docs/openclaw.md recommends: OPENCLAW_GATEWAY_TOKEN is not needed."""
    token = tmp_path / "openclaw"
    token.write_text("gw-token-from-file\n")
    path = write(tmp_path, f'[openclaw]\nurl = "http://127.0.0.1:18789"\ntoken_file = "{token}"\n')
    s = load_settings(path, {})
    assert s.openclaw is not None and s.openclaw.token is not None
    assert s.openclaw.token.get_secret_value() == "gw-token-from-file"
    named = write(tmp_path, path.read_text() + 'token_env = "GW_TOKEN"\n')
    assert load_settings(named, {"GW_TOKEN": "from-env"}).openclaw.token.get_secret_value() == "from-env"  # type: ignore[union-attr]


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
    assert len(problems) == len(set(problems)), f"a problem reported twice: {problems}"
    # each planted mistake is reported exactly once
    assert sum(p.startswith("server.port:") for p in problems) == 1
    assert problems.count("redis.urll: unknown key (did you mean url?)") == 1
    assert sum("openclaw.url" in p for p in problems) == 1
    assert sum("MISSING_SLACK_URL" in p and "not set" in p for p in problems) == 1
    assert sum("events_url" in p for p in problems) == 1
    assert "R0UT1NGKEY-SECRET" not in text


def test_cli_prints_one_line_per_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "[server]\nport = -1\nbogus = 1\n")
    assert main(["--config", str(path), "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert all(line.startswith("config error: server.") for line in err)
    assert "Traceback" not in "".join(err)


def test_an_interrupted_one_shot_command_exits_1_as_documented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge import cli

    def interrupted(*_: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.HANDLERS, "demo", interrupted)
    assert main(["--config", str(write(tmp_path, "")), "demo"]) == 1
    assert capsys.readouterr().err.strip() == "demo: interrupted"


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", {})


def test_zero_configuration_uses_console_sink() -> None:
    s = load_settings(None, {})
    assert s.redis.url is None
    assert s.openclaw is None
    assert [sink.type for sink in s.effective_sinks()] == ["console"]


def test_secrets_come_from_the_given_environment_not_os_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_URL", "https://hooks.slack.com/services/T/B/PROCESS")
    monkeypatch.setenv("DLQ_BRIDGE_SERVER__PORT", "9999")
    path = write(tmp_path, '[[sinks]]\nname = "s"\ntype = "slack"\nurl_env = "SLACK_URL"\n')
    s = load_settings(path, {"SLACK_URL": "https://hooks.slack.com/services/T/B/GIVEN"})
    assert s.sinks[0].url.get_secret_value().endswith("GIVEN")  # type: ignore[union-attr]
    assert s.server.port == 8080
    with pytest.raises(ConfigError, match=r"SLACK_URL .*is not set"):
        load_settings(path, {})
    assert os.environ["SLACK_URL"].endswith("PROCESS")


def test_building_a_model_reads_no_environment_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_URL", "https://hooks.slack.com/services/T/B/X")
    monkeypatch.setenv("DLQ_BRIDGE_SERVER__PORT", "9999")
    sink = SlackSinkSettings(name="s", type="slack", url_env="SLACK_URL", url_file=tmp_path / "absent")
    assert sink.url is None  # resolving secrets is load_settings' job, not a validator's
    assert Settings().server.port == 8080


def test_a_required_secret_needs_one_of_its_three_sources(tmp_path: Path) -> None:
    path = write(tmp_path, '[[sinks]]\nname = "hook"\ntype = "webhook"\nurl = "https://x.test/in"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path, {})
    assert info.value.problems == ['sinks["hook"]: set one of secret, secret_env or secret_file']


def test_secret_file_and_env_file_problems_name_the_key(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    path = write(
        tmp_path,
        f'[[sinks]]\nname = "pd"\ntype = "pagerduty"\nrouting_key_file = "{empty}"\n'
        f'[[sinks]]\nname = "s"\ntype = "slack"\nurl_env = "S_URL"\n',
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path, {"S_URL_FILE": str(tmp_path / "nope")})
    assert info.value.problems == [
        f'sinks["pd"].routing_key_file: {empty} is empty',
        f'sinks["s"].url_env (S_URL_FILE): {tmp_path / "nope"} cannot be read (No such file or directory)',
    ]


def test_openclaw_model_defaults_from_the_agent(tmp_path: Path) -> None:
    path = write(tmp_path, '[openclaw]\nurl = "http://127.0.0.1:1"\nagent = "triage"\ntoken = "t"\n')
    s = load_settings(path, {})
    assert s.openclaw is not None and s.openclaw.model == "openclaw/triage"
    assert s.openclaw.token is not None and s.openclaw.token.get_secret_value() == "t"


def test_non_utf8_config_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_bytes(b'[server]\nhost = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path, {})
    assert info.value.problems == [f"config file {path} is not UTF-8 text (byte 20)"]


@pytest.mark.parametrize("url", ["redis://:pw@127.0.0.1:99999/0", "redis://:pw@127.0.0.1:port/0"])
def test_redis_url_with_a_bad_port_is_one_clear_line(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, f'[redis]\nurl = "{url}"\n'), {})
    assert info.value.problems == ["redis.url has a bad port (a number from 1 to 65535)"], "no prefix said twice"
    assert "pw" not in str(info.value)


def test_unknown_dlq_bridge_variables_are_named_with_the_closest_setting() -> None:
    environ = {
        "DLQ_BRIDGE_SERVR__PORT": "1",
        "DLQ_BRIDGE_SERVER_PORT": "1",
        "DLQ_BRIDGE_SERVER__PORT": "9000",
        "DLQ_BRIDGE_SEVERITY__payments*": "critical",
        "DLQ_BRIDGE_CONFIG": "x.toml",
        "DLQ_BRIDGE_MY_TOKEN": "t",
        "OTHER": "x",
    }
    s = load_settings(None, {k: v for k, v in environ.items() if k != "DLQ_BRIDGE_CONFIG"})
    assert s.server.port == 9000
    environ["DLQ_BRIDGE_WHATEVER"] = "x"
    s = Settings(openclaw={"url": "http://x.test", "token_env": "DLQ_BRIDGE_MY_TOKEN"})
    assert [u.message for u in unknown_env_variables(s, environ)] == [
        "environment variable DLQ_BRIDGE_SERVER_PORT matches no setting and is ignored"
        " (did you mean DLQ_BRIDGE_SERVER__PORT?)",
        "environment variable DLQ_BRIDGE_SERVR__PORT matches no setting and is ignored"
        " (did you mean DLQ_BRIDGE_SERVER__PORT?)",
        "environment variable DLQ_BRIDGE_WHATEVER matches no setting and is ignored",
    ]


def test_config_errors_name_tables_by_their_name_and_suggest_the_closest_key(tmp_path: Path) -> None:
    """Issue 34: an unknown key in the file gets a "did you mean" (as an unknown variable does), a sink or
    a source is named by its `name`, and no line says its prefix twice."""
    path = write(tmp_path, '[server]\nprot = 8080\n[sources]\narchiv_max = 5\n'
                           '[[sinks]]\nname = "pd"\ntype = "pagerduty"\nrouting_key = "k"\nrouting_key_envv = "X"\n'
                           '[[sinks]]\nname = "hook"\ntype = "webhook"\nurl_env = "NOPE_URL"\nsecret = "x"\n'
                           '[[sources.sidekiq]]\nname = "sk"\nnamespce = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path, {})
    assert sorted(info.value.problems) == sorted([
        "server.prot: unknown key (did you mean port?)",
        "sources.archiv_max: unknown key (did you mean archive_max?)",
        'sinks["pd"].routing_key_envv: unknown key (did you mean routing_key_env?)',
        'sinks["hook"].url_env: environment variable NOPE_URL (or NOPE_URL_FILE) is not set',
        'sources.sidekiq["sk"].namespce: unknown key (did you mean namespace?)',
    ])
