"""Cause grouping against fingerprint grouping, in the same run (issue 25, docs/design.md 5d).

One outage (the same connection error to one host, ids and numbers varying) over 12 queues, plus
a share of unrelated errors. For each of `group_by = "fingerprint"` and `"cause"`:

- grouping decisions per second: `group_key(alert, group_by)` alone (the cause pays for reading
  the error text: class, template, dependency);
- `Grouper.add` per second against real Redis, one at a time;
- Redis commands per entry, from `INFO commandstats` (the `EVALSHA` round trip and every command
  the add script runs inside it), and the groups the storm opened.

    python -m bench.bench_cause_grouping [--jobs 3000]
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from bench.common import jobs_bench_main
from bridge.core.models import Alert
from bridge.settings import SlackSinkSettings
from bridge.stores.groups import Grouper, group_key
from tests.support.receiver import make_alert

BENCH_DB = 13
QUEUES = [f"queue-{i:02d}" for i in range(12)]
OUTAGE = ("PG::ConnectionBad: could not connect to server: Connection refused\n"
          '\tIs the server running on host "postgres-primary" (10.0.0.{ip}) and accepting\n'
          "\tTCP/IP connections on port 5432? (job {i}, after {ms}ms)")
OTHER = "KeyError: 'sku-{i}' not in catalogue"


def alerts(n: int) -> list[Alert]:
    out = []
    for i in range(n):
        queue = QUEUES[i % len(QUEUES)]
        error = OTHER.format(i=i) if i % 10 == 0 else OUTAGE.format(ip=i % 200, i=i, ms=i * 7)
        out.append(make_alert(queue=queue, job_id=f"{queue}-{i}", fingerprint=f"fp-{queue}-{i % 10 == 0}",
                              last_error=error, job_name="sync_inventory", source_kind=None))
    return out


def decisions_per_s(batch: list[Alert], group_by: str, rounds: int = 3) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for alert in batch:
            group_key(alert, group_by)
        best = max(best, len(batch) / (time.perf_counter() - start))
    return best


async def commands(client: aioredis.Redis) -> tuple[int, int]:
    """(all commands, EVALSHA calls) so far, from INFO commandstats (this bench's own reads left out)."""
    stats = await client.info("commandstats")
    total = sum(int(v["calls"]) for k, v in stats.items() if k not in ("cmdstat_info",))
    return total, int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def add_run(client: aioredis.Redis, group_by: str, batch: list[Alert]) -> tuple[float, float, float, int]:
    """(adds/s, commands per entry, round trips per entry, groups opened)."""
    grouper = Grouper(client, SlackSinkSettings(name=f"s-{group_by}", type="slack", url="http://127.0.0.1:9/x",
                                                group_by=group_by), time.time)
    await grouper.add(make_alert(job_id="warm", last_error="warm-up"))  # loads the script (SCRIPT LOAD)
    before, evals_before = await commands(client)
    start = time.perf_counter()
    for alert in batch:
        await grouper.add(alert)
    elapsed = time.perf_counter() - start
    after, evals_after = await commands(client)
    groups = await grouper.open_groups() - 1
    n = len(batch)
    return n / elapsed, (after - before - 1) / n, (evals_after - evals_before) / n, groups


async def main_async(url: str, jobs: int) -> None:
    client = aioredis.Redis.from_url(url)
    await client.flushdb()
    batch = alerts(jobs)
    print(f"cause grouping vs fingerprint grouping: {jobs} jobs over {len(QUEUES)} queues "
          "(90% one outage, 10% unrelated)")
    for group_by in ("fingerprint", "cause"):
        rate = decisions_per_s(batch, group_by)
        adds, per_entry, trips, groups = await add_run(client, group_by, batch)
        print(f"  {group_by:<11} decisions {rate:9,.0f}/s · add {adds:6,.0f} jobs/s · "
              f"{per_entry:5.1f} Redis commands/entry ({trips:.1f} round trip) · {groups} groups")
    await client.flushdb()
    await client.aclose()


def main() -> None:
    jobs_bench_main(__doc__ or "", BENCH_DB, main_async)


if __name__ == "__main__":
    main()
