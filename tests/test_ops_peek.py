"""`dlq-bridge peek`: depths by SCAN, paged entries, redacted, strictly read-only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from bridge.cli import main
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.ops import cli, write_config
from tests.support.redis_server import TEST_DB

READ_ONLY = {"SCAN", "LLEN", "LRANGE", "TYPE", "PING", "CLIENT", "HELLO", "SELECT", "ECHO", "INFO", "EXISTS", "HMGET"}


@pytest.fixture
def config(tmp_path: Path, redis_url: str) -> Path:
    return write_config(tmp_path / "b.toml", redis_url)


def peek(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--config", str(config), "peek", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def seed(r: redis.Redis) -> None:
    for i in range(3):
        r.lpush("dead_letter:orders", envelope_entry(job_id=f"o-{i}"))
    r.lpush("dead_letter:payments", envelope_entry(job_id="p-1", queue="payments"))
    r.set("dead_letter:not-a-list", "x")
    r.lpush(keys.processing("dead_letter:orders", "bridge-a"), b"claimed-1", b"claimed-2")
    r.lpush(keys.alerted("dead_letter:shipped"), *[b"done"] * 5)
    r.lpush(keys.UNDELIVERABLE, b"{}")


def table(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:] if line.strip()}


def test_depths_of_every_source(clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(clean_redis)
    code, out = peek(config, capsys)
    assert code == 0
    found = table(out.split("\n\n")[0])
    assert found == {
        "dead_letter:orders": ["3", "2", "0"],
        "dead_letter:payments": ["1", "0", "0"],
        "dead_letter:shipped": ["0", "0", "5"],  # drained DLQ, still known from its archive
    }
    assert "dlq_bridge:undeliverable: 1" in out


def test_entries_are_paged_newest_first_and_redacted(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(5):
        clean_redis.lpush("dead_letter:orders", envelope_entry(
            job_id=f"job-{i}", attempts=i, last_error=f"boom {i} password=hunter2\n  at line 2"))
    code, out = peek(config, capsys, "orders", "--limit", "2", "--offset", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["#", "job", "id", "name", "attempts", "age", "error"]
    assert lines[2].split()[:4] == ["1", "job-3", "ship_order", "3"]
    assert lines[3].split()[:4] == ["2", "job-2", "ship_order", "2"]
    assert "hunter2" not in out and "[REDACTED]" in out
    assert "at line 2" not in out  # one line per entry
    assert "showing 2-3 of 5, newest first" in out and "next page: --offset 3" in out


def test_unparseable_and_archive_and_json(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_redis.lpush("dead_letter:orders", b"\xff\xfe not json")
    clean_redis.lpush(keys.alerted("dead_letter:orders"), envelope_entry(job_id="old-1"))
    code, out = peek(config, capsys, "orders")
    assert code == 0 and "unparseable: not UTF-8" in out and "sha256:" in out
    code, out = peek(config, capsys, "dead_letter:orders", "--archive", "--json")
    assert code == 0
    assert [json.loads(line)["job_id"] for line in out.splitlines()] == ["old-1"]


async def test_archived_entries_are_aged_from_their_hand_off(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    await aredis.lpush("dead_letter:orders", json.dumps({"job_id": "no-time", "last_error": "boom"}))
    async with open_runtime(make_settings()) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
    done = await cli(tmp_path / "bridge.toml", "peek", "orders", "--archive")
    assert done.code == 0, done
    (row,) = [line for line in done.out.splitlines() if "no-time" in line]
    assert re.search(r"\s\d+s\s", row), f"an age, not '-': {row}"


def test_empty_and_wrong_type(clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean_redis.lpush(keys.alerted("dead_letter:drained"), envelope_entry(job_id="old-1"))
    code, out = peek(config, capsys, "drained")
    assert code == 0 and "dead_letter:drained: no entries" in out, "drained, not unknown"
    assert "1 entry alerted and archived: --archive lists them" in out
    code, out = peek(config, capsys, "drainde")
    assert code == 4, "the README's table: 4 for a queue that does not exist"
    assert out == ("peek: no such queue: none of dead_letter:drainde, its archive or its quarantine list exists "
                   "(did you mean dead_letter:drained?)\n")
    clean_redis.set("dead_letter:str", "x")
    code, out = peek(config, capsys, "str")
    assert code == 1 and "not a list" in out


def test_long_errors_are_cut_to_the_terminal(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    clean_redis.lpush("dead_letter:orders", envelope_entry(last_error="E" * 5000))
    _, out = peek(config, capsys, "orders")
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "E…" in out


@contextlib.contextmanager
def monitored(redis_url: str) -> Iterator[list[str]]:
    """Commands the test database receives (MONITOR), until an ECHO sentinel."""
    seen: list[str] = []
    client = redis.Redis.from_url(redis_url)
    ready = threading.Event()

    def listen() -> None:
        with client.monitor() as m:
            ready.set()
            for cmd in m.listen():
                if str(cmd.get("db")) != str(TEST_DB):
                    continue
                if cmd["command"] == "ECHO end-of-peek-test":
                    return
                seen.append(cmd["command"].split()[0].upper())

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ready.wait(5)
    yield seen
    client.echo("end-of-peek-test")
    thread.join(5)
    client.close()


def test_peek_is_read_only_and_never_uses_keys(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    seed(clean_redis)
    before = {k: clean_redis.dump(k) for k in clean_redis.scan_iter()}
    with monitored(redis_url) as seen:
        peek(config, capsys)
        peek(config, capsys, "orders")
        peek(config, capsys, "orders", "--archive")
    assert seen, "MONITOR saw nothing"
    assert set(seen) <= READ_ONLY, set(seen) - READ_ONLY
    assert "KEYS" not in seen and "SCAN" in seen
    assert {k: clean_redis.dump(k) for k in clean_redis.scan_iter()} == before


def test_peek_groups_shows_each_open_group_with_its_jobs(
    clean_redis: redis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every job of a storm stays findable: `peek --groups` lists the group, its size and samples."""
    import asyncio

    import redis.asyncio as aioredis

    from bridge.core.models import Alert, Severity, Summary, SummarySource
    from bridge.intake.chain import normalize
    from bridge.settings import SlackSinkSettings
    from bridge.stores.groups import Grouper

    sink = {"name": "ops-slack", "type": "slack", "url": "https://hooks.example/x"}
    config = write_config(tmp_path / "g.toml", redis_url, sinks=[sink])
    summary = Summary(title="t", severity=Severity.ERROR, likely_cause="c", next_steps=["s"],
                      source=SummarySource.FALLBACK)

    async def storm() -> None:
        client = aioredis.Redis.from_url(redis_url)
        grouper = Grouper(client, SlackSinkSettings.model_validate(sink))
        for i in range(3):
            dl = normalize(envelope_entry(job_id=f"storm-{i}"), "dead_letter:orders")
            await grouper.add(Alert(dead_letter=dl, summary=summary))
        await client.aclose()

    asyncio.run(storm())
    code = main(["--config", str(config), "peek", "--groups", "--json"])
    views = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and len(views) == 1
    assert views[0]["sink"] == "ops-slack" and views[0]["count"] == 3 and views[0]["notified"] == 0
    assert views[0]["sample_keys"] == ["orders:storm-0", "orders:storm-1", "orders:storm-2"]
    assert views[0]["title"] == "t", "the title the console shows"
    assert main(["--config", str(config), "peek", "--groups"]) == 0
    table = capsys.readouterr().out
    assert "ops-slack" in table and table.splitlines()[0].split()[:3] == ["sink", "title", "group"]
