"""`dlq-bridge redrive`: entries back to their work queue, attempts reset, atomically."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bridge.cli import main
from bridge.stores import keys
from bridge.stores.requeue import reset_attempts
from tests.conftest import envelope_entry
from tests.support.ops import ROOT, clean_env, write_config


@pytest.fixture
def config(tmp_path: Path, redis_url: str) -> Path:
    return write_config(tmp_path / "b.toml", redis_url)


def redrive(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--config", str(config), "redrive", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def job_ids(r: redis.Redis, key: str) -> list[str]:
    return [json.loads(raw)["job_id"] for raw in r.lrange(key, 0, -1)]


def push_jobs(r: redis.Redis, key: str, count: int) -> None:
    """job-0 is the oldest (right end), as producers LPUSH."""
    for i in range(count):
        r.lpush(key, envelope_entry(job_id=f"job-{i}", attempts=5))


def test_moves_everything_oldest_first_with_attempts_reset(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    push_jobs(clean_redis, "dead_letter:orders", 3)
    clean_redis.lpush("dead_letter:orders", b"\xff raw bytes")
    code, out = redrive(config, capsys, "orders", "--from-dlq")
    assert code == 0
    assert "moved 4 entries from dead_letter:orders (the DLQ) to orders, attempts reset" in out
    assert clean_redis.llen("dead_letter:orders") == 0
    work = clean_redis.lrange("orders", 0, -1)
    assert work[0] == b"\xff raw bytes"  # non-JSON moved unchanged
    moved = [json.loads(raw) for raw in work[1:]]
    assert [m["job_id"] for m in moved] == ["job-2", "job-1", "job-0"]  # job-0 still claimed first
    assert {m["attempts"] for m in moved} == {0}
    assert moved[0]["last_error"].startswith("TimeoutError")  # the rest is kept


def test_dry_run_changes_nothing(clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    push_jobs(clean_redis, "dead_letter:orders", 3)
    before = clean_redis.lrange("dead_letter:orders", 0, -1)
    code, out = redrive(config, capsys, "orders", "--from-dlq", "--dry-run")
    assert code == 0
    assert "would move 3 of 3 scanned entries" in out and "job-0, job-1, job-2" in out
    assert clean_redis.lrange("dead_letter:orders", 0, -1) == before
    assert not clean_redis.exists("orders")


def test_limit_and_job_id(clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    push_jobs(clean_redis, "dead_letter:orders", 6)
    assert redrive(config, capsys, "orders", "--from-dlq", "--limit", "2")[0] == 0
    assert job_ids(clean_redis, "orders") == ["job-1", "job-0"]
    code, out = redrive(config, capsys, "orders", "--from-dlq", "--job-id", "job-4", "--job-id", "job-3")
    assert code == 0 and "moved 2 entries" in out
    assert job_ids(clean_redis, "orders") == ["job-4", "job-3", "job-1", "job-0"]
    assert job_ids(clean_redis, "dead_letter:orders") == ["job-5", "job-2"]
    code, out = redrive(config, capsys, "orders", "--from-dlq", "--job-id", "no-such-job")
    assert code == 4 and "no entry of dead_letter:orders (the DLQ) has job id no-such-job (2 entries scanned)" in out
    assert out.count("\n") == 1, "one line, never two that contradict each other"


def test_from_archive_and_custom_target(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    push_jobs(clean_redis, keys.alerted("dead_letter:{carts}:eu"), 2)
    code, out = redrive(config, capsys, "dead_letter:{carts}:eu", "--from-archive", "--to", "{carts}:jobs")
    assert code == 0, out
    assert job_ids(clean_redis, "{carts}:jobs") == ["job-1", "job-0"]
    assert clean_redis.llen(keys.alerted("dead_letter:{carts}:eu")) == 0


def test_usage_and_type_errors(
    clean_redis: redis.Redis, tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    custom = write_config(tmp_path / "c.toml", redis_url, sources={"match": "dlq:*"})
    clean_redis.lpush("dlq:orders", b"x")
    code, out = redrive(custom, capsys, "dlq:orders")
    assert code == 2 and "pass --to KEY" in out
    clean_redis.set("orders", "a string")
    code, out = redrive(custom, capsys, "dlq:orders", "--from-dlq", "--to", "orders")
    assert code == 1 and "orders is a string, not a list" in out
    assert clean_redis.lrange("dlq:orders", 0, -1) == [b"x"]


def test_reset_attempts_shapes() -> None:
    assert json.loads(reset_attempts(b'{"attemptsMade": 4, "attempts": 9}')) == {"attemptsMade": 0, "attempts": 0}
    assert json.loads(reset_attempts(b'{"task_id": "t"}')) == {"task_id": "t", "attempts": 0}
    for raw in (b"[1, 2]", b"not json", b"\xff\xfe", b"42"):
        assert reset_attempts(raw) == raw


@pytest.mark.failure
def test_kill_9_during_a_large_redrive_loses_and_duplicates_nothing(
    clean_redis: redis.Redis, config: Path
) -> None:
    total = 20_000
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(total):
            pipe.lpush("dead_letter:orders", json.dumps({"job_id": f"job-{i}", "attempts": 3}))
        pipe.execute()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge", "--config", str(config), "redrive", "orders", "--from-dlq"],
        cwd=ROOT, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while clean_redis.llen("orders") < 2_000 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, "redrive finished before the kill: raise `total`"
    left = [json.loads(raw) for raw in clean_redis.lrange("dead_letter:orders", 0, -1)]
    moved = [json.loads(raw) for raw in clean_redis.lrange("orders", 0, -1)]
    assert left and moved, (len(left), len(moved))  # the kill landed mid-run
    ids = [e["job_id"] for e in left + moved]
    assert len(ids) == total and set(ids) == {f"job-{i}" for i in range(total)}
    assert {e["attempts"] for e in left} == {3} and {e["attempts"] for e in moved} == {0}
    # the oldest went first: everything moved is older than everything left
    assert max(int(e["job_id"][4:]) for e in moved) < min(int(e["job_id"][4:]) for e in left)


def test_long_runs_print_progress_on_stderr(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import bridge.commands.redrive as module

    monkeypatch.setattr(module, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(module, "CHUNK", 100)
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(1_000):
            pipe.lpush("dead_letter:orders", json.dumps({"job_id": f"job-{i}", "attempts": 1}))
        pipe.execute()
    assert main(["--config", str(config), "redrive", "orders", "--from-dlq"]) == 0
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if line.startswith("redrive: ")]
    assert len(progress) >= 9 and "of ~1,000 scanned" in progress[-1]
    assert captured.out.strip() == ("redrive: moved 1,000 entries from dead_letter:orders (the DLQ) to orders, "
                                    "attempts reset")


def test_job_ids_across_many_chunks_and_duplicates(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import bridge.commands.redrive as module

    monkeypatch.setattr(module, "CHUNK", 3)
    push_jobs(clean_redis, "dead_letter:orders", 10)
    clean_redis.rpush("dead_letter:orders", envelope_entry(job_id="job-5", attempts=5))  # an identical twin, oldest
    code, out = redrive(config, capsys, "orders", "--from-dlq",
                        "--job-id", "job-1", "--job-id", "job-5", "--job-id", "job-8")
    assert code == 0 and "moved 4 entries" in out
    assert job_ids(clean_redis, "orders") == ["job-8", "job-5", "job-1", "job-5"]
    assert job_ids(clean_redis, "dead_letter:orders") == [f"job-{i}" for i in (9, 7, 6, 4, 3, 2, 0)]
