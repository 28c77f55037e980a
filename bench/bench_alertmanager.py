"""What a real Alertmanager does with a storm, grouped by us or not.

1,000 dead letters of one cause are drained by one in-process runtime whose only sink is
`type = "alertmanager"`, pointed at Debian's `prometheus-alertmanager` on a free port (route
`group_by: [alertname, queue, fingerprint]`, group_wait 1 s, group_interval 1 s; its receiver is a
local webhook). Two runs:

- `ungrouped`: the sink's default `group_by = "none"`: one alert per dead letter (each with its
  `job_id`), left to Alertmanager's grouping;
- `grouped`: `group_by = "fingerprint"` (group_wait 2 s, group_interval 5 s): the bridge sends one
  alert per group, which each digest updates (it carries the group's first job's `job_id`).

Prints, per run: alerts posted by the bridge (Alertmanager's own `alertmanager_alerts_received_total`),
alerts Alertmanager holds and the jobs the largest of them stands for (a group alert's `count`),
notifications its receiver got, alerts in the largest notification, and seconds from the push to
the first notification.

    python -m bench.bench_alertmanager [--entries 1000] [--observe 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_redis_url, bench_settings
from bridge.runtime import open_runtime
from tests.support.alertmanager import alertmanager
from tests.support.http_server import serve
from tests.support.receiver import Receiver

SOURCE = "dead_letter:orders"


def entry(i: int) -> bytes:
    return json.dumps({
        "queue": "orders", "job_id": f"order-{i}", "job_name": "ship_order", "attempts": 5,
        "last_error": f"TimeoutError: warehouse API timed out after 30s (order {i})",
    }).encode()


def received_total(metrics: str) -> int:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("alertmanager_alerts_received_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


async def one_run(group_by: str, entries: int, observe_s: float) -> dict[str, Any]:
    redis_url, server = bench_redis_url(12)
    hook = Receiver()
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.flushdb()
        async with serve(hook.app) as base, httpx.AsyncClient() as http:
            with alertmanager(Path(tempfile.mkdtemp(prefix="dlqb-am-")), f"{base}/am") as am:
                table = (f'[[sinks]]\nname = "am"\ntype = "alertmanager"\nurl = "{am}"\n'
                         f'group_by = "{group_by}"\ngroup_wait_s = 2.0\ngroup_interval_s = 5.0\n')
                settings = bench_settings(redis_url, table)
                await client.lpush(SOURCE, *[entry(i) for i in range(entries)])
                pushed = time.monotonic()  # the receiver stamps arrivals with time.monotonic()
                async with open_runtime(settings) as runtime:
                    stop = asyncio.Event()
                    task = asyncio.create_task(runtime.pipeline.run(stop))
                    await asyncio.sleep(observe_s)
                    stop.set()
                    await asyncio.wait_for(task, 60)
                posted = received_total((await http.get(f"{am}/metrics")).text)
                held = (await http.get(f"{am}/api/v2/alerts")).json()
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
    notes = [json.loads(r.body) for r in hook.requests]
    return {
        "bridge_group_by": group_by, "dead_letters": entries, "alerts_posted": posted, "alerts_held": len(held),
        "jobs_in_largest_held": max((int(a["annotations"].get("count", "1")) for a in held), default=0),
        "notifications": len(notes), "largest_notification_alerts": max((len(n["alerts"]) for n in notes), default=0),
        "first_notification_s": round(min(r.at for r in hook.requests) - pushed, 2) if hook.requests else None,
    }


async def main(args: argparse.Namespace) -> None:
    for group_by in ("none", "fingerprint"):
        print(json.dumps(await one_run(group_by, args.entries, args.observe)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--observe", type=float, default=30.0, help="seconds the runtime runs per storm")
    asyncio.run(main(parser.parse_args()))
