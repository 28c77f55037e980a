"""Operator commands and settings with kind sources configured: check, peek, redrive, names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from bridge.core.errors import ConfigError
from bridge.settings import load_settings
from tests.support.ops import clean_env, cli, cli_sync


def config(tmp_path: Path, redis_url: str, *tables: str) -> Path:
    path = tmp_path / "bridge.toml"
    head = f'[redis]\nurl = {json.dumps(redis_url)}\nconsumer_id = "ops-kinds"\n'
    path.write_text(head + "".join(tables))
    return path


STREAM = '[[sources.redis_stream]]\nstream = "dead_letters"\n'
SIDEKIQ = "[[sources.sidekiq]]\n"


def test_two_sources_of_one_name_are_a_config_error(tmp_path: Path, redis_url: str) -> None:
    path = config(tmp_path, redis_url, SIDEKIQ, SIDEKIQ)
    with pytest.raises(ConfigError, match="two sources are named 'sidekiq'"):
        load_settings(path, {})
    named = config(tmp_path, redis_url, SIDEKIQ, '[[sources.sidekiq]]\nname = "sidekiq.eu"\n')
    assert [s.source_name() for s in load_settings(named, {}).sources.sidekiq] == ["sidekiq", "sidekiq.eu"]


def test_check_lists_each_kind_source_with_its_depth(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis
) -> None:
    for i in range(2):
        clean_redis.xadd("dead_letters", {"payload": json.dumps({"job_id": f"j{i}"})})
    clean_redis.zadd("dead", {json.dumps({"jid": "a", "queue": "billing"}): 1.0})
    done = cli_sync(config(tmp_path, redis_url, STREAM, SIDEKIQ), "check", "--json")
    rows = {r["target"]: r for r in json.loads(done.out) if r["component"] == "source"}
    assert rows["redis_stream stream.dead_letters"]["detail"] == "depth 2"
    assert rows["sidekiq sidekiq"]["detail"] == "depth 1"
    assert {r["status"] for r in rows.values()} == {"ok"}


async def test_check_lists_a_dramatiq_source_with_its_depth_and_a_refusing_broker_redis(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis
) -> None:
    clean_redis.zadd("dramatiq:billing.XQ", {"r1": 1.0, "r2": 2.0})
    down = '[[sources.dramatiq]]\nname = "dramatiq.down"\nredis_url_env = "DRAMATIQ_DOWN_URL"\n'
    env = clean_env(DRAMATIQ_DOWN_URL="redis://127.0.0.1:9/0")
    done = await cli(config(tmp_path, redis_url, "[[sources.dramatiq]]\n", down), "check", "--json", env=env)
    rows = {r["target"]: r for r in json.loads(done.out) if r["component"] == "source"}
    assert rows["dramatiq dramatiq"]["status"] == "ok" and rows["dramatiq dramatiq"]["detail"] == "depth 2"
    assert rows["dramatiq dramatiq.down"]["status"] == "FAIL", rows["dramatiq dramatiq.down"]
    assert "127.0.0.1:9/" not in done.out, "the URL of the broker's Redis is never shown"


RABBIT = '[[sources.rabbitmq]]\nurl_env = "AMQP_URL"\nqueue = "orders.dlq"\n'


def without_aio_pika(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import aio-pika, installed or not (a sitecustomize hides it)."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['aio_pika'] = None\n")
    return clean_env(PYTHONPATH=str(hide), AMQP_URL="amqp://guest:guest@127.0.0.1:5672/")


async def test_run_without_aio_pika_is_one_line_naming_the_kinds_extra(tmp_path: Path, redis_url: str) -> None:
    done = await cli(config(tmp_path, redis_url, RABBIT), "run", "--port", "0", env=without_aio_pika(tmp_path))
    assert done.code == 2
    assert done.err.strip() == (
        "config error: source rabbitmq.orders.dlq: needs the Python package aio-pika: pip install 'dlq-bridge[kinds]'"
    )


async def test_check_without_aio_pika_names_the_kinds_extra(tmp_path: Path, redis_url: str) -> None:
    done = await cli(config(tmp_path, redis_url, RABBIT), "check", "--json", env=without_aio_pika(tmp_path))
    rows = [r for r in json.loads(done.out) if r["component"] == "source"]
    assert rows and rows[0]["status"] == "FAIL" and "pip install 'dlq-bridge[kinds]'" in rows[0]["detail"]
    assert done.code == 1


def test_run_with_an_unset_url_variable_is_one_line(tmp_path: Path, redis_url: str) -> None:
    done = cli_sync(config(tmp_path, redis_url, RABBIT.replace("AMQP_URL", "NO_SUCH_AMQP_URL")), "run", "--port", "0")
    assert done.code == 2
    first, *others = done.err.strip().splitlines()
    assert first == ('config error: sources.rabbitmq["rabbitmq.orders.dlq"].url_env: environment variable '
                     "NO_SUCH_AMQP_URL is not set")
    # Without the `kinds` extra (a fresh venv with only `test`), one more line names the missing package.
    assert others in ([], ["config error: source rabbitmq.orders.dlq: needs the Python package aio-pika: "
                           "pip install 'dlq-bridge[kinds]'"])


@pytest.mark.parametrize("table", ["rabbitmq", "sidekiq"])
def test_check_with_an_unset_url_variable_is_a_config_error_as_for_redis_and_sinks(
    tmp_path: Path, redis_url: str, table: str
) -> None:
    text = RABBIT.replace("AMQP_URL", "NO_SUCH_URL") if table == "rabbitmq" else \
        SIDEKIQ + 'redis_url_env = "NO_SUCH_URL"\n'
    done = cli_sync(config(tmp_path, redis_url, text), "check")
    assert done.code == 2, "the same error class, the same exit code: an unset variable is a config error"
    assert done.err.startswith(f'config error: sources.{table}["') and "environment variable NO_SUCH_URL is not set" \
        in done.err
    assert done.out == ""


def test_peek_points_to_the_job_systems_own_ui(tmp_path: Path, redis_url: str, clean_redis: redis.Redis) -> None:
    path = config(tmp_path, redis_url, STREAM, SIDEKIQ)
    listing = cli_sync(path, "peek")
    assert "sidekiq (sidekiq): Sidekiq Web" in listing.out
    assert "stream.dead_letters (redis_stream)" in listing.out
    one = cli_sync(path, "peek", "sidekiq")
    assert one.code == 0 and "own UI" in one.out and "Sidekiq Web" in one.out


def test_redrive_on_a_kind_says_the_systems_own_ui_retries(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis
) -> None:
    clean_redis.zadd("dead", {json.dumps({"jid": "a", "queue": "billing"}): 1.0})
    done = cli_sync(config(tmp_path, redis_url, SIDEKIQ), "redrive", "sidekiq")
    assert done.code == 2
    assert "Sidekiq Web" in done.err and "does not retry" in done.err
    assert clean_redis.zcard("dead") == 1
