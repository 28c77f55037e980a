"""The PostgreSQL job systems behind the one kind contract (tests/kinds/test_contract.py): real producers
fail real jobs in a database of the test's own, the bridge reads them over a read-only session."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from bridge.clients.postgres import PgReader
from bridge.sources.kinds import KindReader
from bridge.sources.mapping import dead_letter
from tests.kinds import pg_producers
from tests.kinds.test_contract import LEASE_S, WatchedKind, drain

pytestmark = pytest.mark.xdist_group("postgres")


class PgKind(WatchedKind):
    tables: tuple[str, ...] = ()

    @pytest.fixture(autouse=True)
    def _database(self) -> Iterator[None]:
        if self.missing():
            yield
            return
        self.db = pg_producers.PgDatabase()
        try:
            yield
        finally:
            self.db.drop()

    def walk(self) -> dict[str, Any]:
        """The walker's timers for the contract: no poll interval, no settle window, the test's clock."""
        return {"lease_s": LEASE_S, "poll_s": 0.0, "settle_s": 0.0, "clock": self.now}

    def pg_reader(self, url: str | None = None) -> PgReader:
        return PgReader(SecretStr(url or self.db.url))

    def dump(self) -> Any:
        return self.db.dump(*self.tables)


class TestPgBoss(PgKind):
    expected_queue = "invoices"
    expected_job_name = "invoices"
    expected_error_class = "InvoiceRejected"
    expected_error_text = "invoice for order"
    expected_attempts = 2
    tables = ("pgboss.job", "pgboss.archive")

    def missing(self) -> str | None:
        return pg_producers.pgboss_missing()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(pg_producers.produce_pgboss, self.db.url, "invoices", count, 2)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.pg_boss import pgboss_source

        return pgboss_source("pgboss", self.pg_reader(), self.client(), **self.walk())

    async def inject_garbage(self) -> None:
        await asyncio.to_thread(pg_producers.produce_pgboss, self.db.url, "junk", 1, 1)
        self.db.execute(
            'UPDATE pgboss.job SET output = \'{"name": 7, "message": ["x"]}\'::jsonb, '
            "data = '[1, {}]'::jsonb, retry_count = -3 WHERE name = 'junk'"
        )

    async def test_garbage_becomes_an_unparseable_or_sparse_dead_letter_never_a_crash(self) -> None:
        """jsonb is always JSON, and a pg-boss job is named by its queue: garbage gives a sparse letter."""
        await self.inject_garbage()
        records = await drain(await self.new_reader("r1"))
        assert len(records) == 1
        letter = dead_letter(records[0])
        assert letter.job_id and letter.parse_error is None
        assert letter.last_error is None and letter.attempts is None


class TestProcrastinate(PgKind):
    expected_queue = "billing"
    expected_job_name = "charge_card"
    expected_error_text = "Procrastinate keeps no error text"
    expected_attempts = 2  # retry=1: the task raised twice
    tables = ("procrastinate_jobs", "procrastinate_events")

    def missing(self) -> str | None:
        return pg_producers.procrastinate_missing()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(pg_producers.produce_procrastinate, self.db.url, "billing", count)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.pg_procrastinate import procrastinate_source

        return procrastinate_source("procrastinate", self.pg_reader(), self.client(), **self.walk())

    async def inject_garbage(self) -> None:
        await asyncio.to_thread(pg_producers.produce_procrastinate, self.db.url, "junk", 1)
        self.db.execute(
            "UPDATE procrastinate_jobs SET task_name = '', args = '[null, 7]', attempts = -1 WHERE queue_name = 'junk'"
        )


class TestDelayedJob(PgKind):
    expected_queue = "billing"
    expected_job_name = "ChargeCardJob"
    expected_error_text = "card declined for order"
    expected_attempts = 2  # max_attempts 2
    tables = ("delayed_jobs",)

    def missing(self) -> str | None:
        return pg_producers.delayed_job_missing()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(pg_producers.produce_delayed_job, self.db.url, "billing", count)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.pg_delayed_job import delayed_job_source

        return delayed_job_source("delayed_job", self.pg_reader(), self.client(), **self.walk())

    async def inject_garbage(self) -> None:
        await asyncio.to_thread(pg_producers.produce_delayed_job, self.db.url, "junk", 1)
        self.db.execute(
            "UPDATE delayed_jobs SET handler = E'--- !ruby/object:\\\\xff\\n&a [*a]', last_error = NULL, "
            "attempts = 0 WHERE queue = 'junk'"
        )
