"""The PostgreSQL job systems beyond the contract (issue 38): a SELECT-only role suffices and the session
cannot write; each failed job once across restarts; a retry with the library's own call (and a delete)
resolves the held alert, once across replicas; a job failing within `settle_s` waits for the next pass."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
import redis
import redis.asyncio as aioredis
from pydantic import SecretStr

from bridge.clients.postgres import PgReader
from bridge.core.resolves import Reason
from bridge.delivery.resolve import Resolve, parse_resolve
from bridge.sources.leaving import LeaveNote
from bridge.sources.watched import WatchedSource
from bridge.stores.handoff import Parcel
from tests.kinds import pg_producers
from tests.kinds.test_contract import drain

pytestmark = pytest.mark.xdist_group("postgres")


@dataclass
class Kind:
    """How a test drives one job system: fail jobs, retry or delete them by its own API, read them."""

    missing: Callable[[], str | None]
    produce: Callable[[str, int], list[str]]  # database url, count → job ids
    retry: Callable[[str, str], None]  # database url, job id
    delete: Callable[[str, str], None]
    source: Callable[..., WatchedSource]  # (name, PgReader, bridge redis, **options)
    schema: str
    deleted: Reason | None  # what a deleted job resolves as (None: it looks like the job system's retention)


def pgboss_kind() -> Kind:
    from bridge.sources.pg_boss import pgboss_source

    return Kind(
        pg_producers.pgboss_missing,
        lambda url, n: pg_producers.produce_pgboss(url, "invoices", n, 2),
        lambda url, job_id: pg_producers.pgboss_jobs(url, "invoices", "retry", job_id),
        lambda url, job_id: pg_producers.pgboss_jobs(url, "invoices", "delete", job_id),
        pgboss_source,
        "pgboss",
        "deleted",
    )


def procrastinate_kind() -> Kind:
    from bridge.sources.pg_procrastinate import procrastinate_source

    return Kind(
        pg_producers.procrastinate_missing,
        lambda url, n: pg_producers.produce_procrastinate(url, "billing", n),
        lambda url, job_id: pg_producers.procrastinate_jobs(url, "retry", job_id),
        lambda url, job_id: pg_producers.procrastinate_jobs(url, "delete", job_id),
        procrastinate_source,
        "public",
        None,
    )


def delayed_job_kind() -> Kind:
    from bridge.sources.pg_delayed_job import delayed_job_source

    return Kind(
        pg_producers.delayed_job_missing,
        lambda url, n: pg_producers.produce_delayed_job(url, "billing", n),
        lambda url, job_id: pg_producers.delayed_job_jobs(url, "requeue", job_id),
        lambda url, job_id: pg_producers.delayed_job_jobs(url, "delete", job_id),
        delayed_job_source,
        "public",
        "deleted",
    )


KINDS = {"pgboss": pgboss_kind, "procrastinate": procrastinate_kind, "delayed_job": delayed_job_kind}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    made = KINDS[request.param]()
    reason = made.missing()
    if reason:
        pytest.skip(reason)
    return made


@pytest.fixture
def db(kind: Kind) -> Iterator[pg_producers.PgDatabase]:
    database = pg_producers.PgDatabase()
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture
async def bridge(redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


class Readers:
    def __init__(self, kind: Kind, bridge: aioredis.Redis) -> None:
        self.kind, self.bridge, self.made = kind, bridge, list[WatchedSource]()

    def __call__(self, url: str, name: str = "pg", **options: float) -> WatchedSource:
        options = {"poll_s": 0.0, "settle_s": 0.0, **options}
        source = self.kind.source(name, PgReader(SecretStr(url)), self.bridge, **options)
        self.made.append(source)
        return source


@pytest.fixture
async def readers(kind: Kind, bridge: aioredis.Redis) -> AsyncIterator[Readers]:
    made = Readers(kind, bridge)
    yield made
    for source in made.made:
        await source.close()


async def test_a_select_only_role_reads_every_failed_job_and_the_session_cannot_write(
    kind: Kind, db: pg_producers.PgDatabase, readers: Readers
) -> None:
    job_ids = await asyncio.to_thread(kind.produce, db.url, 2)
    reader_url = db.grant_select_only(kind.schema)
    records = await drain(readers(reader_url))
    assert sorted(r.job_id for r in records) == sorted(job_ids)
    import psycopg  # here, not at the top: without the `postgres` extra every test here skips, saying why

    owner = PgReader(SecretStr(db.url))  # even a role that could write gets a read-only session
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await owner.rows("CREATE TABLE bridge_was_here (id int)")
    finally:
        await owner.close()


async def test_each_failed_job_is_read_once_across_a_restart(
    kind: Kind, db: pg_producers.PgDatabase, readers: Readers
) -> None:
    first = await asyncio.to_thread(kind.produce, db.url, 2)
    assert sorted(r.job_id for r in await drain(readers(db.url))) == sorted(first)
    later = await asyncio.to_thread(kind.produce, db.url, 1)
    again, replica = readers(db.url), readers(db.url)
    assert [r.job_id for r in await drain(again)] == later
    assert await drain(replica) == []


async def test_a_job_failing_within_settle_s_waits_for_the_next_pass(
    kind: Kind, db: pg_producers.PgDatabase, readers: Readers
) -> None:
    await asyncio.to_thread(kind.produce, db.url, 1)
    assert await drain(readers(db.url, settle_s=3600.0)) == []
    assert len(await drain(readers(db.url))) == 1


async def test_a_retry_by_the_library_resolves_a_delete_resolves_and_each_once_across_replicas(
    kind: Kind, db: pg_producers.PgDatabase, readers: Readers
) -> None:
    retried, deleted, kept = await asyncio.to_thread(kind.produce, db.url, 3)
    source = readers(db.url)
    while (record := await source.claim()) is not None:
        assert await source.ack_held(record.receipt, note(record.job_id))
    await asyncio.to_thread(kind.retry, db.url, retried)
    await asyncio.to_thread(kind.delete, db.url, deleted)
    forwarded: list[Parcel] = []
    replicas = [readers(db.url, "pg"), readers(db.url, "pg")]
    for replica in replicas:
        await replica.rescan()
    await asyncio.gather(*(r.check_leaving(collect(forwarded)) for r in replicas))
    resolves = {r.dedup_key: r.reason for r in (parse_resolve(p.alert) for p in forwarded)}
    expected: dict[str, Reason] = {retried: "retried", **({deleted: kind.deleted} if kind.deleted else {})}
    assert resolves == expected
    await source.check_leaving(collect(forwarded))
    assert len(forwarded) == len(expected), "the job still failed stays held; each departure resolves once"
    assert kept not in resolves


def note(job_id: str) -> LeaveNote:
    resolve = Resolve(dedup_key=job_id, idempotency_key=f"pg:{job_id}", digest="d" * 16, reason="retried")
    return LeaveNote(("pd",), resolve)


def collect(into: list[Parcel]) -> Callable[[str, Parcel], Awaitable[None]]:
    async def forward(_outbox: str, parcel: Parcel) -> None:
        into.append(parcel)

    return forward


async def test_the_retention_banner_reads_each_tables_own_retention(
    kind: Kind, db: pg_producers.PgDatabase, readers: Readers
) -> None:
    """pg-boss archives failed jobs by age (`archiveFailedAfterSeconds`): its fill is the oldest failed job's
    age against that; Procrastinate and Delayed Job keep failed jobs until deleted: their count, no cap."""
    await asyncio.to_thread(kind.produce, db.url, 2)
    options = {"archive_failed_after_s": 1.0} if kind.schema == "pgboss" else {}
    source = readers(db.url, **options)
    await source.rescan()
    [fill] = await source.fills()
    if kind.schema != "pgboss":
        assert (fill.count, fill.cap) == (2, None)
        return
    assert fill.cap is not None and (fill.cap.limit, fill.cap.unit) == (1, "seconds")
    assert "archiveFailedAfterSeconds" in fill.cap.setting
    for _ in range(50):  # the jobs failed moments ago: their age reaches the 1 s cap
        [fill] = await source.fills()
        if fill.count >= 1:
            break
        await asyncio.sleep(0.1)
    assert fill.count >= 1 and fill.cap is not None and fill.cap.level == fill.count
