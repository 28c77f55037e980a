"""`dlq-bridge silence add|query|update|expire`: amtool's commands on the console's silences."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from bridge.cli import main
from bridge.commands.silence import UsageError, parse_duration
from bridge.stores import keys
from tests.support.ops import write_config


@pytest.fixture
def config(tmp_path: Path, redis_url: str) -> Path:
    return write_config(tmp_path / "b.toml", redis_url)


def silence(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--config", str(config), "silence", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def stored(r: redis.Redis, silence_id: str) -> dict[str, object]:
    raw = r.hget(keys.SILENCES, silence_id)
    assert raw is not None
    value: dict[str, object] = json.loads(raw)
    return value


def test_silence_one_queue_s_warnings_for_an_hour(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = time.time()
    code, out, _ = silence(
        config,
        capsys,
        "add",
        "queue=emails",
        'severity=~"warn.*"',
        "--duration",
        "1h",
        "--comment",
        "SMTP relay maintenance",
        "--author",
        "alice",
    )
    assert code == 0
    made = stored(clean_redis, out.strip())
    assert made["matchers"] == [
        {"name": "queue", "op": "=", "value": "emails"},
        {"name": "severity", "op": "=~", "value": "warn.*"},
    ]
    assert (made["author"], made["reason"]) == ("alice", "SMTP relay maintenance")
    assert before + 3600 <= float(made["ends_at"]) <= time.time() + 3600  # type: ignore[arg-type]
    audit = [json.loads(x) for x in clean_redis.lrange(keys.AUDIT, 0, -1)]
    assert audit[0]["action"] == "silence" and audit[0]["who"] == "alice" and "warn.*" in audit[0]["detail"]


def test_query_lists_filters_and_prints_ids(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, first, _ = silence(config, capsys, "add", 'queue=~"e.*"', "-c", "one", "-a", "alice")
    _, second, _ = silence(config, capsys, "add", "queue=reports", "-c", "two", "-a", "bob")
    code, table, _ = silence(config, capsys, "query")
    assert code == 0 and first.strip() in table and second.strip() in table
    assert "CREATED BY" in table and 'queue=~"e.*"' in table and "active" in table
    _, ids, _ = silence(config, capsys, "query", "queue=emails", "-q")
    assert ids.split() == [first.strip()]
    _, none, _ = silence(config, capsys, "query", "queue=payments")
    assert none.strip() == "no silences"


def test_update_extends_in_place_and_new_matchers_make_a_new_id(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = silence(config, capsys, "add", "queue=emails", "-c", "x", "-a", "alice")
    first = out.strip()
    code, again, _ = silence(config, capsys, "update", first, "--duration", "4h", "-a", "alice")
    assert code == 0 and again.strip() == first
    assert float(stored(clean_redis, first)["ends_at"]) > time.time() + 3 * 3600  # type: ignore[arg-type]
    code, fresh, _ = silence(config, capsys, "update", first, "queue=reports", "-a", "alice")
    assert code == 0 and fresh.strip() != first
    assert stored(clean_redis, first)["replaced_by"] == fresh.strip()
    _, ids, _ = silence(config, capsys, "query", "-q")
    assert ids.split() == [fresh.strip()]


def test_expire_ends_it_now_and_a_missing_id_exits_4(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = silence(config, capsys, "add", "cause=fp1", "-c", "x", "-a", "alice")
    code, done, _ = silence(config, capsys, "expire", out.strip(), "-a", "bob")
    assert code == 0 and done.strip() == f"expired {out.strip()}"
    assert stored(clean_redis, out.strip())["expired_by"] == "bob"
    assert silence(config, capsys, "query", "-q")[1] == ""
    assert out.strip() in silence(config, capsys, "query", "--expired")[1]
    code, _, err = silence(config, capsys, "expire", "nope")
    assert code == 4 and "no silence nope" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["add", "team=x", "-c", "x"], "unknown label 'team'"),
        (["add", "queue=~(", "-c", "x"], "not a valid RE2 regex"),
        (["add", "queue=~.*", "-c", "x"], "must not match the empty string"),
        (["add", "queue=x", "-c", "x", "--duration", "soon"], "not a duration"),
        (["add", "queue=x", "-c", "x", "--end", "2001-01-01T00:00:00Z"], "not in the future"),
    ],
)
def test_bad_matchers_and_times_exit_2_and_store_nothing(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _, err = silence(config, capsys, *args)
    assert code == 2 and says in err
    assert clean_redis.hlen(keys.SILENCES) == 0


def test_durations() -> None:
    assert [parse_duration(t) for t in ("90s", "30m", "1h30m", "2d", "1w")] == [90, 1800, 5400, 172800, 604800]
    for bad in ("", "1y", "0h", "400d", "h"):
        with pytest.raises(UsageError):
            parse_duration(bad)
