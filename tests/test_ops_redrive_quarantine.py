"""`dlq-bridge redrive QUEUE --quarantine`: quarantined entries back onto their DLQ, byte for byte,
atomically, recorded in the console's audit list."""

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

from bridge.stores import keys
from tests.support.ops import ROOT, clean_env
from tests.test_ops_redrive import config, redrive

__all__ = ["config"]  # the fixture of the redrive tests

DLQ = "dead_letter:orders"


def quarantine(r: redis.Redis, entries: list[bytes]) -> None:
    """As the hand-off does: LPUSH onto the quarantine list, the first entry the oldest."""
    for raw in entries:
        r.lpush(keys.quarantine(DLQ), raw)


def test_dry_run_then_redrive_pushes_the_exact_bytes_back_and_audits(
    clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = [json.dumps({"job_id": f"poison-{i}", "attempts": 5}).encode() for i in range(3)] + [b"\xff raw"]
    quarantine(clean_redis, entries)
    code, out = redrive(config, capsys, "orders", "--quarantine", "--dry-run")
    assert code == 0
    assert f"would move 4 of 4 scanned entries from {keys.quarantine(DLQ)} (its quarantine list) to {DLQ}" in out
    assert "job ids: poison-0, poison-1, poison-2" in out and "nothing changed" in out
    assert clean_redis.llen(keys.quarantine(DLQ)) == 4 and not clean_redis.exists(keys.AUDIT)

    code, out = redrive(config, capsys, "orders", "--quarantine")
    assert code == 0
    assert f"moved 4 entries from {keys.quarantine(DLQ)} (its quarantine list) to {DLQ}, bytes unchanged" in out
    assert clean_redis.llen(keys.quarantine(DLQ)) == 0
    assert clean_redis.lrange(DLQ, 0, -1) == list(reversed(entries)), "oldest first, byte for byte"
    (record,) = [json.loads(raw) for raw in clean_redis.lrange(keys.AUDIT, 0, -1)]
    assert (record["action"], record["target"], record["outcome"]) == ("redrive-quarantine", DLQ, "ok")
    assert record["who"].startswith("cli:") and "moved 4 entries" in record["detail"]


def test_limit_job_id_and_usage(clean_redis: redis.Redis, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quarantine(clean_redis, [json.dumps({"job_id": f"p-{i}"}).encode() for i in range(5)])
    assert redrive(config, capsys, "orders", "--quarantine", "--job-id", "p-3")[0] == 0
    assert [json.loads(r)["job_id"] for r in clean_redis.lrange(DLQ, 0, -1)] == ["p-3"]
    assert redrive(config, capsys, "orders", "--quarantine", "--limit", "2")[0] == 0
    assert clean_redis.llen(DLQ) == 3 and clean_redis.llen(keys.quarantine(DLQ)) == 2
    with pytest.raises(SystemExit) as exited:
        redrive(config, capsys, "orders", "--quarantine", "--from-archive")
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_kill_9_mid_way_loses_and_duplicates_nothing(clean_redis: redis.Redis, config: Path) -> None:
    total = 20_000
    with clean_redis.pipeline(transaction=False) as pipe:
        for i in range(total):
            pipe.lpush(keys.quarantine(DLQ), json.dumps({"job_id": f"q-{i}"}))
        pipe.execute()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge", "--config", str(config), "redrive", "orders", "--quarantine"],
        cwd=ROOT, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while clean_redis.llen(DLQ) < 2_000 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, "redrive finished before the kill: raise `total`"
    left = [json.loads(raw)["job_id"] for raw in clean_redis.lrange(keys.quarantine(DLQ), 0, -1)]
    moved = [json.loads(raw)["job_id"] for raw in clean_redis.lrange(DLQ, 0, -1)]
    assert left and moved, (len(left), len(moved))
    assert len(left) + len(moved) == total and set(left + moved) == {f"q-{i}" for i in range(total)}
