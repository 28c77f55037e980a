"""Operator commands on a Redis Cluster: check, peek, redrive, undeliverable, summarize (tests/cluster/conftest.py).

The single-server tests run here unchanged where the command behaves the same; redrive
gets its own tests, since a work queue in another slot than its DLQ is reached through
a staging list on a cluster (bridge/commands/redrive.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from bridge.cli import main
from bridge.stores import keys
from tests.conftest import envelope_entry
from tests.support.redis_cluster import LocalCluster
from tests.test_delivery_commands import test_undeliverable_list_then_retry_removes_only_what_was_delivered
from tests.test_ops_peek import (
    config,
    test_depths_of_every_source,
    test_entries_are_paged_newest_first_and_redacted,
)
from tests.test_ops_redrive import (
    test_dry_run_changes_nothing,
    test_from_archive_and_custom_target,
    test_limit_and_job_id,
    test_moves_everything_oldest_first_with_attempts_reset,
)
from tests.test_summarize_cli import (
    test_empty_queue_fails,
    test_queue_entry_with_gateway_renders_sinks_and_sends_nothing,
)

__all__ = [
    "config",
    "test_depths_of_every_source",
    "test_dry_run_changes_nothing",
    "test_empty_queue_fails",
    "test_entries_are_paged_newest_first_and_redacted",
    "test_from_archive_and_custom_target",
    "test_limit_and_job_id",
    "test_moves_everything_oldest_first_with_attempts_reset",
    "test_queue_entry_with_gateway_renders_sinks_and_sends_nothing",
    "test_undeliverable_list_then_retry_removes_only_what_was_delivered",
]


def run(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--config", str(config), *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_check_names_the_cluster_and_its_masters(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(config, capsys, "check", "--timeout", "3")
    assert code == 0, out
    assert "cluster of 3 masters, state ok" in out


def test_check_reads_the_eviction_policy_of_every_master(
    local_cluster: LocalCluster, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(config, capsys, "check", "--timeout", "3")
    assert [line for line in out.splitlines() if line.startswith("redis memory") and "noeviction" in line], out
    victim = local_cluster.primaries()[-1]
    node = redis.Redis(port=victim)
    node.config_set("maxmemory-policy", "allkeys-lru")
    try:
        code, out = run(config, capsys, "check", "--timeout", "3")
        assert code == 1, out
        assert f"maxmemory-policy allkeys-lru on 127.0.0.1:{victim} can evict any key" in out
        assert main(["--config", str(config), "run", "--port", "0"]) == 2  # run refuses it too
        assert f"run: maxmemory-policy allkeys-lru on 127.0.0.1:{victim}" in capsys.readouterr().err
    finally:
        node.config_set("maxmemory-policy", "noeviction")
        node.close()


def test_check_fails_while_a_master_is_down(
    local_cluster: LocalCluster, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = local_cluster.primaries()[-1]
    if f":{victim}" in local_cluster.url:
        victim = local_cluster.primaries()[0]
    # its replica first: otherwise, on a slow machine, the replica is promoted (node timeout 2 s) before
    # `check` asks, and the cluster is whole again (check then rightly says ok)
    replica = local_cluster.replica_of(victim)
    local_cluster.kill9(replica)
    local_cluster.kill9(victim)
    try:
        code, out = run(config, capsys, "check", "--timeout", "3")
        assert code == 1, out
        assert [line for line in out.splitlines() if line.startswith("redis") and "FAIL" in line], out
    finally:
        local_cluster.restart(victim)
        local_cluster.restart(replica)
        local_cluster.wait_ok()


def test_peek_finds_dlqs_on_every_master(
    clean_redis: RedisCluster, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = [f"q{i}" for i in range(12)]
    for q in queues:
        clean_redis.lpush(f"dead_letter:{q}", envelope_entry(queue=q))
    nodes = {clean_redis.get_node_from_key(f"dead_letter:{q}").name for q in queues}
    assert len(nodes) == 3, "the DLQs should span every master"
    code, out = run(config, capsys, "peek")
    assert code == 0, out
    assert all(f"dead_letter:{q} " in out for q in queues), out


def test_redrive_across_slots_goes_through_staging_and_an_interrupted_one_is_finished(
    clean_redis: RedisCluster, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dlq, work = "dead_letter:orders", "orders"
    assert keys.key_slot(dlq.encode()) != keys.key_slot(work.encode())
    clean_redis.lpush(keys.redrive_staging(dlq), json.dumps({"job_id": "left-by-a-kill", "attempts": 0}))
    for i in range(3):
        clean_redis.lpush(dlq, envelope_entry(job_id=f"job-{i}", attempts=4))
    code, out = run(config, capsys, "redrive", "orders", "--from-dlq")
    assert code == 0, out
    assert "an interrupted redrive left" in out and "moved 3 entries" in out
    moved = [json.loads(raw)["job_id"] for raw in clean_redis.lrange(work, 0, -1)]
    assert moved == ["job-2", "job-1", "job-0", "left-by-a-kill"]
    assert clean_redis.llen(dlq) == 0 and clean_redis.llen(keys.redrive_staging(dlq)) == 0


def test_redrive_within_one_slot_stays_one_script_per_entry(
    clean_redis: RedisCluster, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_redis.lpush("dead_letter:{carts}", envelope_entry(job_id="c-1"))
    code, out = run(config, capsys, "redrive", "dead_letter:{carts}", "--from-dlq", "--to", "{carts}:jobs")
    assert code == 0, out
    assert clean_redis.llen("{carts}:jobs") == 1
    assert clean_redis.exists(keys.redrive_staging("dead_letter:{carts}")) == 0


def test_the_deploy_example_config_passes_check_on_a_cluster(
    local_cluster: LocalCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/redis-cluster/bridge.toml, its node address swapped for the local cluster's."""
    monkeypatch.setenv("DLQ_BRIDGE_REDIS__URL", local_cluster.url)
    example = Path(__file__).resolve().parents[2] / "deploy" / "redis-cluster" / "bridge.toml"
    code, out = run(example, capsys, "check", "--timeout", "3")
    assert code == 0, out
    assert "cluster of 3 masters, state ok" in out
