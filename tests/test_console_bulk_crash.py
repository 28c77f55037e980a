"""A bulk redrive of a snapshot survives `kill -9` of the bridge in the middle of it (bridge/console/bulk.py).

The real `dlq-bridge run` serves the console; 120 dead letters are shown on a search page,
10 more arrive after it, a bulk redrive of the page's snapshot runs as one batch of 120 and the
bridge is killed with SIGKILL once 20 or more of its entries are back on the work queue: in the
middle of the batch, after some moves and before its progress is written (the worst point). A new
bridge is started and the same bulk action is run on (the killed run's lease is waited out; the
batch is done again). Every entry of the snapshot is then on the work queue exactly once, the
late ones are still archived, and the audit list says 120 of 120 redriven.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bridge.stores import keys
from bridge.stores.bulk_jobs import bulk_key
from tests.support.bridge_process import kill9, start_bridge, terminate, wait_for, wait_healthz, write_config
from tests.support.http_server import ThreadedServer
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow

TOKEN = "bulk-crash-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Console-User": "carol"}
SNAPSHOT, LATE = 120, 10


def _push(client: redis.Redis, jobs: list[str]) -> None:
    client.lpush("dead_letter:orders", *[json.dumps({"job_id": j, "job_name": "ship_order", "attempts": 4,
                                                     "last_error": "TimeoutError: warehouse"}) for j in jobs])


def _archived(client: redis.Redis) -> list[str]:
    return [json.loads(x)["job_id"] for x in client.lrange(keys.alerted("dead_letter:orders"), 0, -1)]


def _runner(url: str, bulk_id: str, stop: threading.Event, seen: list[dict[str, Any]]) -> None:
    """The page's loop: one batch per call until done; errors (the bridge is down, the lease) retried."""
    while not stop.is_set():
        try:
            reply = httpx.post(f"{url}/api/v1/bulk/{bulk_id}/run", params={"batch": SNAPSHOT}, headers=AUTH, timeout=10)
        except httpx.HTTPError:
            time.sleep(0.1)
            continue
        if reply.status_code == 200:
            seen.append(reply.json())
            if reply.json()["state"] == "done":
                return
        else:
            time.sleep(0.2)


def test_kill_9_in_the_middle_of_a_bulk_redrive_then_running_it_on_redrives_each_entry_once(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path
) -> None:
    client = clean_redis
    port = free_port()
    hook = Receiver()
    with ThreadedServer(hook.app) as wh:
        cfg = write_config(tmp_path / "bridge.toml", {
            "server": {"port": port},
            "redis": {"url": redis_url, "consumer_id": "bulk-crash-1"},
            "sources": {"rescan_interval_s": 0.2},
            "console": {"enabled": True, "token_env": "CONSOLE_TEST_TOKEN"},
            "sinks": [{"name": "hook", "type": "webhook", "url": f"{wh.url}/hook", "secret": "s"}],
        })
        env = {"CONSOLE_TEST_TOKEN": TOKEN}
        url = f"http://127.0.0.1:{port}"
        proc = start_bridge(["--config", str(cfg), "run"], env=env)
        try:
            wait_healthz(port, proc)
            shown = [f"s{i:03d}" for i in range(SNAPSHOT)]
            _push(client, shown)
            assert wait_for(lambda: len(_archived(client)) == SNAPSHOT, 60)
            page = httpx.get(f"{url}/api/v1/search", params={"limit": 100}, timeout=10).json()
            assert len(page["entries"]) == 100 and {e["envelope"]["job_id"] for e in page["entries"]} <= set(shown)
            late = [f"late{i}" for i in range(LATE)]
            _push(client, late)
            assert wait_for(lambda: len(_archived(client)) == SNAPSHOT + LATE, 60)
            made = httpx.post(f"{url}/api/v1/bulk", headers=AUTH, timeout=30,
                              json={"action": "redrive", "filter": {"as_of": page["snapshot"]}})
            assert made.status_code == 201 and made.json()["total"] == SNAPSHOT, made.text
            bulk_id = made.json()["id"]

            stop, seen = threading.Event(), list[dict[str, Any]]()
            runner = threading.Thread(target=_runner, args=(url, bulk_id, stop, seen), daemon=True)
            runner.start()
            assert wait_for(lambda: client.llen("orders") >= 20, 60, interval=0.001)
            kill9(proc)
            moved_at_kill = client.llen("orders")
            progress_at_kill = int(client.hget(bulk_key(bulk_id), "processed") or 0)
            proc = start_bridge(["--config", str(cfg), "run"], env=env)
            wait_healthz(port, proc)
            runner.join(timeout=90)
            stop.set()
            assert not runner.is_alive(), f"the bulk redrive never finished: {seen[-1:]}"
            audit = [json.loads(a) for a in client.lrange(keys.AUDIT, 0, -1)]
        finally:
            terminate(proc)
    assert SNAPSHOT > moved_at_kill >= 20 and progress_at_kill == 0, "killed in the middle of the one batch"
    queue = [json.loads(x)["job_id"] for x in client.lrange("orders", 0, -1)]
    assert sorted(queue) == shown, "every entry of the snapshot exactly once, no late arrival"
    assert sorted(_archived(client)) == sorted(late)
    final = seen[-1]
    assert (final["state"], final["processed"], final["done"], final["skipped"]) == ("done", SNAPSHOT, SNAPSHOT, 0)
    ends = [(a["who"], a["outcome"], a["detail"][:30]) for a in audit if a["action"] == "bulk-redrive"]
    assert ends[0] == ("carol", "ok", "120 of 120 entries redriven, 0"), ends
