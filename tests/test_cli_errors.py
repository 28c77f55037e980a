"""Issue 10, defects 3, 4 and 6: one clear line per mistake, and exit codes defined once.

Every case runs the real CLI in a subprocess (`python -m bridge …`), as a user would.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from bridge.core.exit_codes import EXIT_CODES, exit_codes_help, exit_codes_table
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.ops import ROOT, clean_env, write_config


def cli(*args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "bridge", *args], cwd=ROOT, env=env or clean_env(),
        input=stdin.decode(), capture_output=True, text=True, timeout=60, check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def config(tmp_path: Path, redis_url: str) -> Path:
    return write_config(tmp_path / "b.toml", redis_url)


# --- exit codes, defined once (defect 3) --------------------------------------------------

def test_every_exit_code_is_documented_in_help_readme_and_operations() -> None:
    assert sorted(EXIT_CODES) == [0, 1, 2, 3, 4]
    table = exit_codes_table()
    assert table in (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    help_text = cli("--help").stdout
    for line in exit_codes_help().splitlines()[1:]:
        assert " ".join(line.split()) in " ".join(help_text.split())


# --- configuration and start-up problems: one line each (defect 3) ------------------------

def test_a_config_file_that_is_not_utf8_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_bytes(b'[server]\nhost = "caf\xe9"\n')
    proc = cli("--config", str(path), "check")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"config error: config file {path} is not UTF-8 text (byte 20)"]


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_redis_url_with_a_bad_port_is_one_line_exit_2(tmp_path: Path, command: str) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('[redis]\nurl = "redis://:hunter2@127.0.0.1:70000/0"\n')
    proc = cli("--config", str(path), command)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["config error: redis.url has a bad port (a number from 1 to 65535)"]
    assert "hunter2" not in proc.stderr + proc.stdout


def test_run_on_a_port_in_use_is_one_line_exit_3(config: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cli("--config", str(config), "run", "--port", str(port))
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [f"run: cannot listen on 127.0.0.1:{port}: Address already in use"]


# --- DLQ_BRIDGE_ typos are named (defect 4) ----------------------------------------------

def test_unknown_dlq_bridge_variables_are_warned_with_the_closest_setting(config: Path) -> None:
    env = clean_env(DLQ_BRIDGE_SERVR__PORT="1", DLQ_BRIDGE_SERVER_PORT="1")
    checked = cli("--config", str(config), "check", "--timeout", "1", env=env)
    rows = [line for line in checked.stdout.splitlines() if line.startswith("environment")]
    assert len(rows) == 2 and all(" warn " in row for row in rows)
    assert all("(did you mean DLQ_BRIDGE_SERVER__PORT?)" in row for row in rows)
    assert checked.returncode == 0, checked.stdout  # a warning, not a failure
    peeked = cli("--config", str(config), "peek", env=env)
    warnings = [line for line in peeked.stderr.splitlines() if "matches no setting" in line]
    assert [w.split("environment variable ")[1].split()[0] for w in warnings] == [
        "DLQ_BRIDGE_SERVER_PORT", "DLQ_BRIDGE_SERVR__PORT",
    ]


# --- same mistake, same answer: name what was not found, exit 4 (defect 6) ---------------

def test_redrive_of_a_queue_that_does_not_exist(config: Path, clean_redis: redis.Redis) -> None:
    clean_redis.lpush("dead_letter:orders", envelope_entry(job_id="job-1"))
    clean_redis.lpush(keys.alerted("dead_letter:emails"), envelope_entry(job_id="mail-1"))  # drained: archive only
    proc = cli("--config", str(config), "redrive", "ordrs")
    assert proc.returncode == 4
    assert ("no such queue: none of dead_letter:ordrs, its archive, its quarantine list or the work queue ordrs "
            "exists") in proc.stderr
    assert "did you mean dead_letter:orders?" in proc.stderr
    assert "moved" not in proc.stdout
    assert clean_redis.llen("dead_letter:orders") == 1
    drained = cli("--config", str(config), "redrive", "email")
    assert drained.returncode == 4 and "did you mean dead_letter:emails?" in drained.stderr


def test_redrive_of_a_job_id_that_no_entry_has(config: Path, clean_redis: redis.Redis) -> None:
    clean_redis.lpush("dead_letter:orders", envelope_entry(job_id="job-1"))
    proc = cli("--config", str(config), "redrive", "orders", "--from-dlq", "--job-id", "nope", "--job-id", "job-1")
    assert proc.returncode == 4
    assert proc.stderr.strip() == ("redrive: moved 1 entry from dead_letter:orders (the DLQ) to orders, attempts "
                                   "reset; no entry has job id nope")
    assert clean_redis.llen("orders") == 1  # job-1 was found and moved


def test_summarize_with_empty_stdin(config: Path, clean_redis: redis.Redis) -> None:
    proc = cli("--config", str(config), "summarize", "-", stdin=b"")
    assert proc.returncode == 4
    assert proc.stderr.strip() == "summarize: no entry: stdin is empty"


def test_undeliverable_and_send_test_with_a_sink_that_does_not_exist(
    config: Path, clean_redis: redis.Redis
) -> None:
    listed = cli("--config", str(config), "undeliverable", "list", "--sink", "nosuch")
    retried = cli("--config", str(config), "undeliverable", "retry", "--sink", "nosuch")
    sent = cli("--config", str(config), "send-test", "--sink", "nosuch")
    for proc, command in ((listed, "undeliverable"), (retried, "undeliverable"), (sent, "send-test")):
        assert proc.returncode == 4, proc.stderr
        assert proc.stderr.strip() == f"{command}: no sink named nosuch (configured: console)"
    known = cli("--config", str(config), "undeliverable", "list", "--sink", "console")
    assert known.returncode == 0 and "no undeliverable records for sink console" in known.stdout


# --- the [console] token is required only by what serves the console (issue 34) ----------

def test_the_readme_console_snippet_with_its_variable_unset_stops_only_what_serves_the_console(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis
) -> None:
    config = write_config(tmp_path / "b.toml", redis_url,
                          console={"enabled": True, "token_env": "DLQ_BRIDGE_CONSOLE_TOKEN"})
    peeked = cli("--config", str(config), "peek")
    assert peeked.returncode == 0 and "config error" not in peeked.stderr, peeked.stderr
    checked = cli("--config", str(config), "check")
    assert checked.returncode == 2, "check vouches for run, which serves the console"
    assert checked.stderr.splitlines() == [
        "config error: console.token_env: environment variable DLQ_BRIDGE_CONSOLE_TOKEN "
        "(or DLQ_BRIDGE_CONSOLE_TOKEN_FILE) is not set"]
    disabled = write_config(tmp_path / "d.toml", redis_url, console={"token_env": "DLQ_BRIDGE_CONSOLE_TOKEN"})
    assert cli("--config", str(disabled), "check").stderr.count("config error") == 0, "no console, no token"


def test_with_redis_unreachable_every_command_names_the_address_and_exits_1(tmp_path: Path) -> None:
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{port.getsockname()[1]}"  # bound, never listening: refused
    config = write_config(tmp_path / "b.toml", f"redis://{address}/0")
    try:
        for args in (["peek"], ["redrive", "orders"], ["undeliverable", "list"]):
            proc = cli("--config", str(config), *args)
            assert proc.returncode == 1, (args, proc.stderr)
            assert proc.stderr.startswith(f"{args[0]}: Redis error at redis://{address}/0: "), (args, proc.stderr)
    finally:
        port.close()
