"""Cost of fleet-wide grouping in Redis: `Grouper.add` per job, `claim_due` per group.

Adds N jobs of 2 causes to one Slack sink's groups (sequentially, then with
32 adds in flight as a delivery worker with bounded concurrency would), and
times a claim of a 10,000-member group and of a webhook page of 500 jobs.

    python -m bench.bench_grouping [--jobs 3000]
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from bench.common import jobs_bench_main
from bridge.settings import SlackSinkSettings, WebhookSinkSettings
from bridge.stores import keys
from bridge.stores.groups import Grouper
from tests.support.receiver import make_alert

BENCH_DB = 12


async def add_all(grouper: Grouper, n: int, offset: int, in_flight: int) -> float:
    alerts = [make_alert(job_id=f"job-{offset + i}", fingerprint=f"cause-{i % 2}") for i in range(n)]
    start = time.perf_counter()
    for i in range(0, n, in_flight):
        await asyncio.gather(*(grouper.add(a) for a in alerts[i : i + in_flight]))
    return time.perf_counter() - start


async def main_async(url: str, jobs: int) -> None:
    client = aioredis.Redis.from_url(url, max_connections=64)
    await client.flushdb()
    now = [time.time()]
    slack = Grouper(client, SlackSinkSettings(name="s", type="slack", url="http://127.0.0.1:9/x"), lambda: now[0])
    sequential = await add_all(slack, jobs, 0, 1)
    concurrent = await add_all(slack, jobs, jobs, 32)
    big = Grouper(client, SlackSinkSettings(name="big", type="slack", url="http://127.0.0.1:9/x"), lambda: now[0])
    await add_all(big, 10_000, 0, 32)
    hook_settings = WebhookSinkSettings(name="h", type="webhook", url="http://127.0.0.1:9/h", secret="s",
                                        group_by="queue")
    hook = Grouper(client, hook_settings, lambda: now[0])
    await add_all(hook, 10_000, 0, 32)
    now[0] += 10
    start = time.perf_counter()
    [n] = await big.claim_due(1)  # one of its two 5,000-member groups
    claim_big = time.perf_counter() - start
    start = time.perf_counter()
    [page] = await hook.claim_due()
    claim_page = time.perf_counter() - start
    used = await client.memory_usage(keys.group_job_details("big", n.group_key)) or 0
    await client.flushdb()
    await client.aclose()
    print(f"grouping: {jobs} jobs of 2 causes into one sink's groups")
    print(f"  add, one at a time:   {jobs / sequential:8.0f} jobs/s")
    print(f"  add, 32 in flight:    {jobs / concurrent:8.0f} jobs/s")
    print(f"  claim of a 5,000-member group (10 samples): {claim_big * 1000:.1f} ms")
    print(f"  claim of a webhook page ({len(page.jobs)} jobs listed): {claim_page * 1000:.1f} ms")
    print(f"  member details of 5,000 jobs: {used / 1e6:.1f} MB")


def main() -> None:
    jobs_bench_main(__doc__ or "", BENCH_DB, main_async)


if __name__ == "__main__":
    main()
