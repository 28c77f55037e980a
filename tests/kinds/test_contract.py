"""One contract, every kind: the real producer library dead-letters real jobs, the reader gets them.

Like saq's queue tests, `KindContract` holds the tests and each `Test<Kind>` subclass says how to
produce dead jobs with the real library and how to build readers. A kind whose tool is missing
skips alone, with the reason (see `missing`). Each kind also runs the source port's contract
(`tests/kinds/port_contract.py`) behind `KindPort`, as `TestRedisListPort` runs it for the lists.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aioredis

from bridge.config.sources import ListSourcesSettings
from bridge.sources.kind_port import KindPort
from bridge.sources.kinds import KindReader, KindRecord
from bridge.sources.mapping import dead_letter
from bridge.sources.redis_list import RedisListSource
from bridge.sources.source import Source
from tests.kinds import producers
from tests.kinds.port_contract import PortContract

LEASE_S = 30.0


class KindContract(PortContract):
    """Subclasses set the expectations and implement the hooks."""

    expected_queue: ClassVar[str] = ""
    expected_job_name: ClassVar[str] = ""
    expected_error_class: ClassVar[str | None] = None
    expected_error_text: ClassVar[str] = ""
    expected_attempts: ClassVar[int] = 1

    # --- hooks --------------------------------------------------------------------------
    def missing(self) -> str | None:
        return None

    async def produce(self, count: int) -> list[str] | None:
        """Dead-letter `count` jobs with the real library; their job ids when the test knows them."""
        raise NotImplementedError

    async def reader(self, consumer: str) -> KindReader:
        raise NotImplementedError

    async def takeover_reader(self, consumer: str, holder: KindReader) -> KindReader:
        """A reader that gets what `holder` claimed and never acked (the holder has stopped)."""
        raise NotImplementedError

    async def inject_garbage(self) -> None:
        raise NotImplementedError

    def dump(self) -> Any:
        """The owner-held store, byte for byte (owner-held kinds only)."""
        raise NotImplementedError

    async def teardown_kind(self) -> None:
        return None

    # --- fixtures -----------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    async def _kind(self, redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[None]:
        reason = self.missing()
        if reason:
            pytest.skip(reason)
        self.redis_url = redis_url
        self.sync_redis = clean_redis
        self.clients: list[aioredis.Redis] = []
        self.readers: list[KindReader] = []
        yield
        for reader in self.readers:
            await reader.close()
        for client in self.clients:
            await client.aclose()
        await self.teardown_kind()

    def client(self) -> aioredis.Redis:
        client = aioredis.Redis.from_url(self.redis_url)
        self.clients.append(client)
        return client

    async def new_reader(self, consumer: str) -> KindReader:
        reader = await self.reader(consumer)
        self.readers.append(reader)
        return reader

    async def port(self, consumer: str) -> Source:
        return KindPort(await self.new_reader(consumer), self.client(), consumer, heartbeat_ttl_s=30, archive_max=100)

    async def port_after_crash(self, consumer: str, holder: Source) -> Source:
        assert isinstance(holder, KindPort)
        reader = await self.takeover_reader(consumer, holder.reader)
        return KindPort(reader, self.client(), consumer, heartbeat_ttl_s=30, archive_max=100)

    # --- the contract -------------------------------------------------------------------
    async def test_each_dead_job_is_read_once_with_its_envelope_fields(self) -> None:
        job_ids = await self.produce(2)
        reader = await self.new_reader("r1")
        records = await drain(reader)
        assert len(records) == 2
        if job_ids is not None:
            assert sorted(r.job_id for r in records) == sorted(job_ids)
        for record in records:
            letter = dead_letter(record)
            assert letter.parse_error is None
            assert letter.queue == self.expected_queue
            assert letter.job_id == record.job_id
            assert letter.job_name == self.expected_job_name
            assert letter.attempts == self.expected_attempts
            assert letter.last_error is not None and self.expected_error_text in letter.last_error
            if self.expected_error_class:
                assert letter.last_error.startswith(f"{self.expected_error_class}: ")
            assert letter.first_failed_at is not None and letter.first_failed_at.startswith("20")
        assert await reader.claim() is None

    async def test_a_restart_sees_only_what_it_has_not_finished(self) -> None:
        await self.produce(3)
        first = await self.new_reader("r1")
        done = [await claim_ack(first), await claim_ack(first)]
        await first.close()
        again = await self.new_reader("r1")
        rest = await drain(again)
        assert len(rest) == 1
        assert rest[0].job_id not in {r.job_id for r in done}

    async def test_two_replicas_see_each_dead_job_exactly_once(self) -> None:
        job_ids = await self.produce(4)
        replicas = [await self.new_reader("r1"), await self.new_reader("r2")]
        seen: list[str] = []
        held: list[tuple[KindReader, KindRecord]] = []
        idle = turn = 0
        while idle < 2:
            replica = replicas[turn % 2]
            turn += 1
            record = await replica.claim()
            if record is None:
                idle += 1
                continue
            idle = 0
            seen.append(record.job_id)
            held.append((replica, record))
            if len(held) == 2:  # both replicas hold a record at once, then finish
                for owner, done in held:
                    assert await owner.ack(done.receipt)
                held.clear()
        for owner, done in held:
            assert await owner.ack(done.receipt)
        assert len(seen) == len(set(seen)) == 4
        if job_ids is not None:
            assert sorted(seen) == sorted(job_ids)

    async def test_a_record_claimed_and_never_acked_goes_to_another_reader(self) -> None:
        await self.produce(1)
        holder = await self.new_reader("r1")
        held = await holder.claim()
        assert held is not None
        other = await self.new_reader("r2")
        assert await other.claim() is None  # leased / pending / invisible / unacked: not handed out twice
        taker = await self.takeover_reader("r3", holder)
        again = await taker.claim()
        assert again is not None and again.job_id == held.job_id
        assert await taker.ack(again.receipt)
        assert await drain(taker) == []

    async def test_depth_counts_what_is_not_finished(self) -> None:
        await self.produce(2)
        reader = await self.new_reader("r1")
        if hasattr(reader, "rescan"):
            await reader.rescan()
        assert await reader.depth() == 2
        assert len(await drain(reader)) == 2
        assert await reader.depth() == 0

    async def test_garbage_becomes_an_unparseable_or_sparse_dead_letter_never_a_crash(self) -> None:
        await self.inject_garbage()
        reader = await self.new_reader("r1")
        records = await drain(reader)
        assert len(records) == 1
        letter = dead_letter(records[0])
        assert letter.job_id
        assert letter.parse_error is not None or letter.job_name is None


async def claim_ack(reader: KindReader) -> KindRecord:
    record = await reader.claim()
    assert record is not None
    assert await reader.ack(record.receipt)
    return record


async def drain(reader: KindReader, limit: int = 50) -> list[KindRecord]:
    records = []
    for _ in range(limit):
        record = await reader.claim()
        if record is None:
            break
        assert await reader.ack(record.receipt)
        records.append(record)
    return records


# --- owner-held kinds ------------------------------------------------------------------------


class WatchedKind(KindContract):
    clock_offset: float = 0.0

    def now(self) -> float:
        import time

        return time.time() + self.clock_offset

    async def takeover_reader(self, consumer: str, holder: KindReader) -> KindReader:
        self.clock_offset = LEASE_S + 1  # the holder's lease has expired
        return await self.new_reader(consumer)

    def store_snapshot(self) -> Any:
        return self.dump()

    async def test_owner_held_store_is_never_changed(self) -> None:
        await self.produce(2)
        before = self.dump()
        reader = await self.new_reader("r1")
        assert len(await drain(reader)) == 2
        assert self.dump() == before


class TestSidekiq(WatchedKind):
    expected_queue = "billing"
    expected_job_name = "ChargeCardWorker"
    expected_error_class = "ArgumentError"
    expected_error_text = "card declined for order"
    expected_attempts = 1

    def missing(self) -> str | None:
        return producers.sidekiq_missing()

    async def produce(self, count: int) -> list[str] | None:
        await asyncio.to_thread(producers.produce_sidekiq, self.redis_url, count)
        return [json.loads(m)["jid"] for m in self.sync_redis.zrange("dead", 0, -1)]

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.sidekiq import sidekiq_source

        return sidekiq_source("sidekiq", self.client(), self.client(), lease_s=LEASE_S, clock=self.now)

    def dump(self) -> Any:
        return self.sync_redis.zrange("dead", 0, -1, withscores=True)

    async def inject_garbage(self) -> None:
        self.sync_redis.zadd("dead", {b"\xff not json at all": 1.0})


class TestBullMQ(WatchedKind):
    expected_queue = "invoices"
    expected_job_name = "send-invoice"
    expected_error_class = "InvoiceRejected"
    expected_error_text = "invoice for order"
    expected_attempts = 2

    def missing(self) -> str | None:
        return producers.bullmq_missing()

    async def produce(self, count: int) -> list[str] | None:
        await asyncio.to_thread(producers.produce_bullmq, self.redis_url, "invoices", count, 2)
        return [m.decode() for m in self.sync_redis.zrange("bull:invoices:failed", 0, -1)]

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.bullmq import bullmq_source

        return bullmq_source("bullmq", self.client(), self.client(), lease_s=LEASE_S, clock=self.now)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("bull:invoices:*") if not k.endswith(b":events"))
        return {k: self.sync_redis.dump(k) for k in keys}

    async def inject_garbage(self) -> None:
        self.sync_redis.hset("bull:junk:meta", "opts.maxLenEvents", "10000")
        self.sync_redis.zadd("bull:junk:failed", {"7": 1.0})
        self.sync_redis.hset("bull:junk:7", mapping={"stacktrace": b"\xff[", "atm": "many", "data": "{"})


class TestRQ(WatchedKind):
    expected_queue = "billing"
    expected_job_name = "tests.producers.rq_jobs.charge_card"
    expected_error_class = "tests.producers.rq_jobs.CardDeclined"
    expected_error_text = "card declined for order"
    expected_attempts = 1

    def missing(self) -> str | None:
        return producers.rq_missing()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(producers.produce_rq, self.redis_url, "billing", count)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.rq import rq_source

        return rq_source("rq", self.client(), self.client(), lease_s=LEASE_S, clock=self.now)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("rq:*") if not k.startswith(b"rq:worker"))
        return {k: self.sync_redis.dump(k) for k in keys if self.sync_redis.type(k) != b"string"}

    async def inject_garbage(self) -> None:
        self.sync_redis.sadd("rq:queues", "rq:queue:junk")
        self.sync_redis.zadd("rq:failed:junk", {"j1": 1.0})
        self.sync_redis.hset("rq:job:j1", mapping={"data": b"\x80\x04cos\nsystem\n", "exc_info": b"\xff\xfe"})
        self.sync_redis.xadd("rq:results:j1", {"type": "2", "exc_string": "eJzzSM3JyVcozy/KSQEAGgQEXQ==!!"})


class TestDramatiq(WatchedKind):
    expected_queue = "billing"
    expected_job_name = "charge_card"
    expected_error_class = "CardDeclined"
    expected_error_text = "card declined for order"
    expected_attempts = 2  # one retry (Retries middleware, max_retries = 1), then the dead-letter queue

    def missing(self) -> str | None:
        return producers.dramatiq_missing()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(producers.produce_dramatiq, self.redis_url, "billing", count, retries=1)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.dramatiq_xq import dramatiq_source

        return dramatiq_source("dramatiq", self.client(), self.client(), lease_s=LEASE_S, clock=self.now)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("dramatiq:*") if not k.startswith(b"dramatiq:__"))
        return {k: self.sync_redis.dump(k) for k in keys}

    async def inject_garbage(self) -> None:
        self.sync_redis.zadd("dramatiq:junk.XQ", {"r1": 1.0})
        self.sync_redis.hset("dramatiq:junk.XQ.msgs", "r1", b"\xff{ not json")


# --- consumable kinds ------------------------------------------------------------------------


class TestRedisStream(KindContract):
    expected_queue = "dead_letters"
    expected_job_name = "ship_order"
    expected_error_class = "TimeoutError"
    expected_error_text = "warehouse API timed out"
    expected_attempts = 3

    async def produce(self, count: int) -> list[str] | None:
        ids = []
        for i in range(count):
            letter = {
                "queue": "orders",
                "job_id": f"job-{i + 1}",
                "job_name": "ship_order",
                "attempts": 3,
                "last_error": "TimeoutError: warehouse API timed out after 30s",
                "first_failed_at": "2026-11-30T00:00:00+00:00",
            }
            self.sync_redis.xadd("dead_letters", {"payload": json.dumps(letter)})
            ids.append(f"job-{i + 1}")
        return ids

    async def reader(self, consumer: str, min_idle_ms: int = 600_000) -> KindReader:
        from bridge.sources.redis_stream import RedisStreamSource

        return RedisStreamSource(
            "stream",
            self.client(),
            stream="dead_letters",
            group="dlq-bridge",
            consumer=consumer,
            min_idle_ms=min_idle_ms,
        )

    async def takeover_reader(self, consumer: str, holder: KindReader) -> KindReader:
        await asyncio.sleep(0.05)
        reader = await self.reader(consumer, min_idle_ms=10)
        self.readers.append(reader)
        return reader

    async def inject_garbage(self) -> None:
        self.sync_redis.xadd("dead_letters", {"payload": b"\xff\x00 not json"})


class TestRabbitMQCelery(KindContract):
    expected_job_name = "shop.reserve_stock"
    expected_error_text = "rejected"
    expected_attempts = 1

    def missing(self) -> str | None:
        return producers.rabbitmq_missing()

    @pytest.fixture(autouse=True)
    def _names(self) -> Any:
        if self.missing():
            yield
            return
        self.names = producers.CeleryNames.fresh()
        producers.declare_celery(self.names)
        self.expected_queue = self.names.work_queue  # type: ignore[misc]
        yield
        producers.delete_celery(self.names)

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(producers.produce_celery, self.names, count)

    async def reader(self, consumer: str) -> KindReader:
        from bridge.sources.rabbitmq import RabbitMQSource

        return RabbitMQSource("rabbitmq", producers.AMQP_URL, queue=self.names.dlq)

    async def takeover_reader(self, consumer: str, holder: KindReader) -> KindReader:
        await holder.close()  # the holder's connection ends with the message unacked: the broker redelivers
        return await self.new_reader(consumer)

    async def inject_garbage(self) -> None:
        from kombu import Connection

        with Connection(producers.AMQP_URL) as conn:
            conn.Producer().publish(b"\xff\x00 not json", exchange="", routing_key=self.names.dlq)


class TestSqs(KindContract):
    expected_queue = "orders-dlq"
    expected_job_name = "ship_order"
    expected_error_class = "KeyError"
    expected_error_text = "'sku'"
    expected_attempts = 2

    def missing(self) -> str | None:
        return producers.sqs_missing()

    @pytest.fixture(autouse=True)
    def _moto(self) -> Any:
        if self.missing():
            yield
            return
        self.sqs = producers.MotoSqs()
        yield
        self.sqs.stop()

    async def produce(self, count: int) -> list[str] | None:
        return await asyncio.to_thread(self.sqs.produce, count)

    async def reader(self, consumer: str, visibility: int = 2) -> KindReader:
        from bridge.sources.sqs import SqsSource

        return SqsSource("sqs", self.sqs.make_client(), queue_url=self.sqs.dlq_url, visibility_timeout_s=visibility)

    async def takeover_reader(self, consumer: str, holder: KindReader) -> KindReader:
        await asyncio.sleep(2.5)  # the holder's visibility timeout (2 s) ends: SQS hands the message out again
        return await self.new_reader(consumer)

    async def inject_garbage(self) -> None:
        self.sqs.client.send_message(QueueUrl=self.sqs.dlq_url, MessageBody="\u0000 not json {")


# --- the lists -------------------------------------------------------------------------------


class TestRedisListPort(PortContract):
    """The `dead_letter:*` lists behind the same port contract."""

    @pytest.fixture(autouse=True)
    async def _lists(self, redis_url: str, clean_redis: redis.Redis) -> AsyncIterator[None]:
        self.redis_url = redis_url
        self.sync_redis = clean_redis
        self.clients: list[aioredis.Redis] = []
        yield
        for client in self.clients:
            await client.aclose()

    def client(self) -> aioredis.Redis:
        client = aioredis.Redis.from_url(self.redis_url)
        self.clients.append(client)
        return client

    async def produce(self, count: int) -> list[str] | None:
        ids = [f"job-{i + 1}" for i in range(count)]
        for job_id in ids:
            self.sync_redis.lpush("dead_letter:orders", json.dumps({"job_id": job_id, "last_error": "E: x"}))
        return ids

    async def port(self, consumer: str) -> Source:
        settings = ListSourcesSettings(poll_interval_s=0.01)
        return RedisListSource(self.client(), settings, consumer)

    async def port_after_crash(self, consumer: str, holder: Source) -> Source:
        return await self.port(consumer)  # recover / reap moves the entries back to their DLQ
