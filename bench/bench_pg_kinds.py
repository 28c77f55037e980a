"""What watching a PostgreSQL job table costs (issue 38): 1,000,000 jobs of which 1,000 failed, per kind.

For pg-boss, Procrastinate and Delayed Job it builds the table with the job system's own schema (made by
its real library: tests/producers/), fills it with SQL, then prints: the queries and time to alert all
1,000 failed jobs from an empty cursor (pages of 200), the queries and time of one idle poll (nothing
new), of `depth`, and of one leave check over the 1,000 held jobs, and the EXPLAIN (ANALYZE, BUFFERS)
plans of the page query at the start and at the watermark, and of the leave check's query.

    python -m bench.bench_pg_kinds [--jobs 1000000] [--failed 1000] [--kinds pgboss,procrastinate,delayed_job]
    # PostgreSQL at DLQ_TEST_PG_URL (default postgresql://postgres@127.0.0.1:5432): a database of its own,
    # dropped at the end; Redis: a private server, or DLQ_BRIDGE_BENCH_REDIS_URL (flushed)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import redis.asyncio as aioredis
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import on_bench_redis
from bridge.clients.postgres import SESSION_SETUP, PgReader
from bridge.delivery.resolve import Resolve
from bridge.sources.leaving import LeaveNote
from bridge.sources.watched import WatchedSource
from bridge.sources.watched_table import PAGE, After, TableMapper
from bridge.stores.handoff import Parcel
from tests.kinds import pg_producers

PGBOSS_FILL = """
INSERT INTO pgboss.job (name, data, state, retry_count, created_on, started_on, completed_on, output)
SELECT 'invoices', jsonb_build_object('orderId', g),
       (CASE WHEN g %% %(every)s = 0 THEN 'failed' ELSE 'completed' END)::pgboss.job_state, 1,
       now() - interval '2 days', now() - interval '2 days',
       now() - interval '1 day' + g * interval '50 ms',
       CASE WHEN g %% %(every)s = 0
            THEN '{"name": "InvoiceRejected", "message": "invoice rejected", "stack": "InvoiceRejected: …"}'::jsonb
            ELSE '{}'::jsonb END
FROM generate_series(1, %(jobs)s) g
"""

PROCRASTINATE_FILL = (
    "SET session_replication_role = replica",  # Procrastinate's event triggers: the events are written below
    """INSERT INTO procrastinate_jobs (id, queue_name, task_name, args, status, attempts)
       SELECT g, 'billing', 'charge_card', jsonb_build_object('order_id', g),
              (CASE WHEN g %% %(every)s = 0 THEN 'failed' ELSE 'succeeded' END)::procrastinate_job_status, 1
       FROM generate_series(1, %(jobs)s) g""",
    """INSERT INTO procrastinate_events (job_id, type, at)
       SELECT g, t.type::procrastinate_job_event_type,
              now() - interval '1 day' + g * interval '50 ms' + t.n * interval '1 ms'
       FROM generate_series(1, %(jobs)s) g,
            LATERAL (VALUES (0, 'deferred'), (1, 'started'),
                            (2, CASE WHEN g %% %(every)s = 0 THEN 'failed' ELSE 'succeeded' END)) t(n, type)
       ORDER BY g, t.n""",
    "SELECT setval('procrastinate_jobs_id_seq', %(jobs)s)",
    "SET session_replication_role = DEFAULT",
)

DELAYED_JOB_FILL = """
INSERT INTO delayed_jobs (priority, attempts, handler, last_error, run_at, failed_at, queue, created_at, updated_at)
SELECT 0, CASE WHEN g %% %(every)s = 0 THEN 2 ELSE 0 END,
       E'--- !ruby/struct:ChargeCardJob\\norder_id: ' || g,
       CASE WHEN g %% %(every)s = 0 THEN E'card declined\\njobs.rb:15:in `perform''' END,
       (now() AT TIME ZONE 'UTC') + interval '1 hour' + g * interval '50 ms',
       CASE WHEN g %% %(every)s = 0 THEN (now() AT TIME ZONE 'UTC') - interval '1 day' + g * interval '50 ms' END,
       'billing', now(), now()
FROM generate_series(1, %(jobs)s) g
"""


def kinds() -> dict[str, tuple[Callable[[str], object], tuple[str, ...], Callable[..., WatchedSource], str]]:
    from bridge.sources.pg_boss import pgboss_source
    from bridge.sources.pg_delayed_job import delayed_job_source
    from bridge.sources.pg_procrastinate import procrastinate_source

    return {
        "pgboss": (lambda url: pg_producers.produce_pgboss(url, "invoices", 1, 1), (
            "DELETE FROM pgboss.job", PGBOSS_FILL), pgboss_source, "pgboss.job"),
        "procrastinate": (lambda url: pg_producers.produce_procrastinate(url, "billing", 1), (
            "DELETE FROM procrastinate_events", "DELETE FROM procrastinate_jobs", *PROCRASTINATE_FILL),
            procrastinate_source, "procrastinate_jobs"),
        "delayed_job": (lambda url: pg_producers.produce_delayed_job(url, "billing", 1), (
            "DELETE FROM delayed_jobs", DELAYED_JOB_FILL), delayed_job_source, "delayed_jobs"),
    }


def build(db: pg_producers.PgDatabase, kind: str, jobs: int, failed: int) -> float:
    started = time.perf_counter()
    make_schema, fill, _, _table = kinds()[kind]
    make_schema(db.url)  # the job system's own schema, made by its real library
    with psycopg.connect(db.url, autocommit=True) as conn:
        for statement in fill:
            conn.execute(statement, {"jobs": jobs, "every": jobs // failed})
        conn.execute("VACUUM ANALYZE")  # every table, as autovacuum would have by then
    return time.perf_counter() - started


def explain(url: str, sql: str, params: dict[str, Any]) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = psycopg.ClientCursor(conn)
        for statement in SESSION_SETUP:
            cur.execute(statement)
        cur.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        return "\n".join("    " + str(row[0]) for row in cur.fetchall())


def note(job_id: str) -> LeaveNote:
    return LeaveNote(("pd",), Resolve(dedup_key=job_id, idempotency_key=f"pg:{job_id}", digest="0" * 16))


async def measure(kind: str, db: pg_producers.PgDatabase, redis_url: str, failed: int) -> None:
    bridge = aioredis.Redis.from_url(redis_url)
    await bridge.flushdb()
    reader = PgReader(SecretStr(db.url))
    source = kinds()[kind][2](kind, reader, bridge, poll_s=0.0, settle_s=0.0)
    await source.rescan()
    table = next(iter(source._sets.values()))
    mapper: TableMapper = table._mapper  # type: ignore[attr-defined]
    start_page = mapper.page(After(0), PAGE, 0.0)

    t0, q0, seen = time.perf_counter(), reader.queries, 0
    while (record := await source.claim()) is not None:
        assert await source.ack_held(record.receipt, note(record.job_id))
        seen += 1
    catch_up_s, catch_up_q = time.perf_counter() - t0, reader.queries - q0
    print(f"  alerted {seen} of {failed} failed jobs from an empty cursor: {catch_up_q} queries "
          f"(pages of {PAGE}, the last one empty), {catch_up_s:.2f} s")

    idle = []
    for _ in range(5):
        q0, t0 = reader.queries, time.perf_counter()
        assert await source.claim() is None
        idle.append((reader.queries - q0, time.perf_counter() - t0))
    print(f"  one idle poll (nothing new): {idle[-1][0]} query, {1000 * min(t for _, t in idle):.1f} ms (best of 5)")

    q0, t0 = reader.queries, time.perf_counter()
    depth = await source.depth()
    print(f"  depth: {reader.queries - q0} query, {1000 * (time.perf_counter() - t0):.1f} ms (= {depth})")

    parcels: list[Parcel] = []

    async def forward(_outbox: str, parcel: Parcel) -> None:
        parcels.append(parcel)

    q0, t0 = reader.queries, time.perf_counter()
    await source.check_leaving(forward)
    print(f"  one leave check over {seen} held jobs, all still failed: {reader.queries - q0} queries, "
          f"{1000 * (time.perf_counter() - t0):.1f} ms, {len(parcels)} resolves")

    mark = int((await bridge.hget(f"dlq_bridge:cursor:{{{kind}}}", "score") or b"0").decode())
    held = [m.decode() for m in await bridge.zrange(f"dlq_bridge:cursor:{{{kind}}}:held", 0, 249)]
    print("  plan: the first page (empty cursor)")
    print(explain(db.url, *start_page))
    print("  plan: an idle poll (at the watermark)")
    print(explain(db.url, *mapper.page(After(mark), PAGE, 0.0)))
    print("  plan: the leave check (250 held jobs)")
    print(explain(db.url, *mapper.fates(held)))
    await source.close()
    await bridge.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--failed", type=int, default=1_000)
    parser.add_argument("--kinds", default="pgboss,procrastinate,delayed_job")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        missing = {"pgboss": pg_producers.pgboss_missing, "procrastinate": pg_producers.procrastinate_missing,
                   "delayed_job": pg_producers.delayed_job_missing}[kind]()
        if missing:
            print(f"{kind}: skipped ({missing})")
            continue
        db = pg_producers.PgDatabase()
        try:
            built_s = build(db, kind, args.jobs, args.failed)
            print(f"{kind}: {args.jobs:,} jobs, {args.failed:,} failed (built in {built_s:.0f} s)")
            on_bench_redis(13, lambda url, kind=kind, db=db: measure(kind, db, url, args.failed))
        finally:
            db.drop()


if __name__ == "__main__":
    main()
