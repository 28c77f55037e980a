"""A dead job retried or deleted by hand resolves its PagerDuty incident; a producer's trim does not.

For each owner-held kind, the real producer library dead-letters real jobs, `dlq-bridge run`
triggers a local PagerDuty-like receiver, then the library's own API (Sidekiq::DeadSet, BullMQ's
Job, RQ's FailedJobRegistry) retries, deletes or trims: exactly one `resolve` per job that left
by hand, with the dedup_key its trigger carried; none for trimmed jobs; none with
`resolve_on_retry = false`; once with two replicas, and once across a kill -9.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis

from tests.kinds import producers
from tests.kinds.test_service import stop
from tests.support.bridge_process import kill9, start_bridge, wait_healthz
from tests.support.http_server import serve
from tests.support.receiver import Receiver, Reply
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow

WAIT_S = 90.0
SETTLE_S = 2.0  # after the last expected event: time for a wrong resolve to show up (leave checks every 0.3 s)
KEY = "R0UTINGKEY0123456789abcdef012345"


def config_text(redis_url: str, consumer: str, port: int, pd_url: str, kind: str, table: dict[str, Any],
                resolve: bool) -> str:
    lines = [
        "[server]", f"port = {port}", "grace_s = 10",
        "[redis]", f"url = {json.dumps(redis_url)}", f"consumer_id = {json.dumps(consumer)}",
        "[sources]", 'match = ""', "rescan_interval_s = 0.5",
        "[delivery]", "base_delay_s = 0.01", "max_delay_s = 0.05",
        "[[sinks]]", 'name = "pd"', 'type = "pagerduty"', f"routing_key = {json.dumps(KEY)}",
        f"events_url = {json.dumps(pd_url)}", "events_per_minute = 6000", 'group_by = "none"',
        f"resolve_on_retry = {json.dumps(resolve)}",
        f"[[sources.{kind}]]", "leave_check_s = 0.3", "lease_s = 30",
        *(f"{k} = {json.dumps(v)}" for k, v in table.items()),
    ]
    return "\n".join(lines) + "\n"


class LeavingHarness:
    """Subclasses: the kind, its table, and its library's dead-letter, retry, delete and trim calls."""

    kind: ClassVar[str] = ""
    resolve = True

    def missing(self) -> str | None:
        return None

    def table(self) -> dict[str, Any]:
        return {}

    def produce(self, count: int) -> None:
        raise NotImplementedError

    def retry(self, job_id: str) -> None:
        raise NotImplementedError

    def delete(self, job_id: str) -> None:
        raise NotImplementedError

    def trim_oldest(self, alive: int) -> None:
        """Let the producer trim its store by its own rules, so only the newest `alive` jobs stay."""
        raise NotImplementedError

    def in_store(self) -> list[str]:
        """Job ids in the store, oldest first."""
        raise NotImplementedError

    @pytest.fixture(autouse=True)
    async def _service(self, redis_url: str, clean_redis: redis.Redis, tmp_path: Path) -> AsyncIterator[None]:
        reason = self.missing()
        if reason:
            pytest.skip(reason)
        self.redis_url, self.sync_redis, self.tmp = redis_url, clean_redis, tmp_path
        self.pd = Receiver(default=Reply(202, body='{"status":"success"}'))
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            async with serve(self.pd.app) as base:
                self.pd_url = f"{base}/v2/enqueue"
                yield
                for proc in self.procs:
                    stop(proc)
        finally:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    def start(self, *consumers: str) -> list[subprocess.Popen[bytes]]:
        started = []
        for consumer in consumers:
            port = free_port()
            path = self.tmp / f"{consumer}.toml"
            text = config_text(self.redis_url, consumer, port, self.pd_url, self.kind, self.table(), self.resolve)
            path.write_text(text)
            proc = start_bridge(["--config", str(path), "run"])
            self.procs.append(proc)
            started.append((port, proc))
        for port, proc in started:
            wait_healthz(port, proc)
        return [proc for _, proc in started]

    def events(self, action: str) -> list[dict[str, Any]]:
        bodies = [json.loads(r.body) for r in self.pd.requests if r.status == 202]
        return [b for b in bodies if b["event_action"] == action]

    def trigger_keys(self) -> dict[str, str]:
        """job id → the dedup_key its trigger carried."""
        return {e["payload"]["custom_details"]["job_id"]: e["dedup_key"] for e in self.events("trigger")}

    async def wait_for(self, check: Callable[[], bool], *, settle: bool = True) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not check():
            if loop.time() > deadline:
                held = {k: self.sync_redis.zrange(k, 0, -1, withscores=True)
                        for k in self.sync_redis.scan_iter("dlq_bridge:cursor:*:held")}
                raise AssertionError(f"timed out; triggers {len(self.events('trigger'))}, "
                                     f"resolves {[e['dedup_key'] for e in self.events('resolve')]}; held {held}; "
                                     f"store {self.in_store()}")
            await asyncio.sleep(0.1)
        if settle:
            await asyncio.sleep(SETTLE_S)

    def resolved(self) -> Counter[str]:
        return Counter(e["dedup_key"] for e in self.events("resolve"))


class LeavingService(LeavingHarness):
    """The tests every owner-held kind runs."""

    async def test_a_retried_and_a_deleted_job_resolve_once_trimmed_jobs_do_not(self) -> None:
        await asyncio.to_thread(self.produce, 4)
        self.start("leave-a")
        await self.wait_for(lambda: len(self.events("trigger")) >= 4, settle=False)
        oldest, second, third, newest = await asyncio.to_thread(self.in_store)
        await asyncio.to_thread(self.trim_oldest, 4)  # one more job dies; the trim drops `oldest`
        await self.wait_for(lambda: oldest not in self.in_store())  # (and settles: a wrong resolve shows)
        assert self.events("resolve") == [], "a trimmed job is not resolved"
        keys = self.trigger_keys()
        await asyncio.to_thread(self.delete, third)  # deleted while an older one is still dead
        await self.wait_for(lambda: len(self.events("resolve")) >= 1)
        assert self.resolved() == Counter({keys[third]: 1})
        await asyncio.to_thread(self.retry, second)  # retried, now the oldest dead job
        await self.wait_for(lambda: len(self.events("resolve")) >= 2)
        await asyncio.to_thread(self.retry, newest)
        await self.wait_for(lambda: len(self.events("resolve")) >= 3)
        assert self.resolved() == Counter({keys[third]: 1, keys[second]: 1, keys[newest]: 1}), "each once"

    async def test_two_replicas_send_one_resolve(self) -> None:
        await asyncio.to_thread(self.produce, 2)
        self.start("leave-r1", "leave-r2")
        await self.wait_for(lambda: len(self.events("trigger")) >= 2, settle=False)
        job = (await asyncio.to_thread(self.in_store))[0]
        await asyncio.to_thread(self.retry, job)
        await self.wait_for(lambda: len(self.events("resolve")) >= 1)
        assert self.resolved() == Counter({self.trigger_keys()[job]: 1})

    async def test_kill9_around_the_departure_still_resolves_once(self) -> None:
        await asyncio.to_thread(self.produce, 2)
        [victim] = self.start("leave-k")
        await self.wait_for(lambda: len(self.events("trigger")) >= 2, settle=False)
        job = (await asyncio.to_thread(self.in_store))[0]
        await asyncio.to_thread(self.retry, job)
        await asyncio.sleep(0.3)  # about one leave check: killed before, during or after it
        kill9(victim)
        self.start("leave-k")
        await self.wait_for(lambda: len(self.events("resolve")) >= 1)
        assert self.resolved() == Counter({self.trigger_keys()[job]: 1})


# --- per kind -------------------------------------------------------------------------------


class TestSidekiqLeaving(LeavingService):
    kind = "sidekiq"

    def missing(self) -> str | None:
        return producers.sidekiq_missing()

    def table(self) -> dict[str, Any]:
        return {"dead_max_jobs": 5}  # as the app sets it in trim_oldest (Sidekiq keeps dead_max_jobs - 1)

    def produce(self, count: int) -> None:
        producers.produce_sidekiq(self.redis_url, count)

    def in_store(self) -> list[str]:
        return [json.loads(m)["jid"] for m in self.sync_redis.zrange("dead", 0, -1)]

    def retry(self, job_id: str) -> None:
        producers.sidekiq_dead_set(self.redis_url, "retry", job_id)

    def delete(self, job_id: str) -> None:
        producers.sidekiq_dead_set(self.redis_url, "delete", job_id)

    def trim_oldest(self, alive: int) -> None:
        # one more death through DeadSet#kill with dead_max_jobs = alive + 1: Sidekiq keeps the newest `alive`
        producers.sidekiq_dead_set(self.redis_url, "kill", str(alive + 1), "1")


class BullMQKind(LeavingHarness):
    kind = "bullmq"

    def missing(self) -> str | None:
        return producers.bullmq_missing()

    def table(self) -> dict[str, Any]:
        return {"prefix": "bull", "queues": ["invoices"]}

    def produce(self, count: int) -> None:
        producers.produce_bullmq(self.redis_url, "invoices", count, 1)

    def in_store(self) -> list[str]:
        return [m.decode() for m in self.sync_redis.zrange("bull:invoices:failed", 0, -1)]

    def retry(self, job_id: str) -> None:
        producers.bullmq_failed_set(self.redis_url, "invoices", "retry", job_id)

    def delete(self, job_id: str) -> None:
        producers.bullmq_failed_set(self.redis_url, "invoices", "remove", job_id)

    def trim_oldest(self, alive: int) -> None:
        # one more job fails with removeOnFail {count: alive}: BullMQ keeps the newest `alive`
        producers.bullmq_failed_set(self.redis_url, "invoices", "trim", "1", str(alive))


class TestBullMQLeaving(BullMQKind, LeavingService):
    async def test_kill9_while_the_resolve_is_in_flight_sends_it_again_with_the_same_key(self) -> None:
        """The replica dies after PagerDuty got the resolve but before it answered: the restarted
        replica sends it again (a repeat PagerDuty ignores), the same dedup_key, and then stops."""
        await asyncio.to_thread(self.produce, 2)
        [victim] = self.start("leave-f")
        await self.wait_for(lambda: len(self.events("trigger")) >= 2, settle=False)
        self.pd.default = Reply(202, body='{"status":"success"}', delay_s=30)  # PagerDuty hangs
        job = (await asyncio.to_thread(self.in_store))[0]
        await asyncio.to_thread(self.retry, job)
        await self.wait_for(lambda: len(self.events("resolve")) >= 1, settle=False)  # in flight
        kill9(victim)
        self.pd.default = Reply(202, body='{"status":"success"}')
        self.start("leave-f")
        await self.wait_for(lambda: len(self.events("resolve")) >= 2)
        assert self.resolved() == Counter({self.trigger_keys()[job]: 2}), "sent again, never a third time"


class TestRQLeaving(LeavingService):
    kind = "rq"
    short_lived: ClassVar[int] = 3  # failure_ttl (s) of the job RQ will expire

    def missing(self) -> str | None:
        return producers.rq_missing()

    def table(self) -> dict[str, Any]:
        return {"queues": ["billing"]}

    def produce(self, count: int) -> None:
        if not getattr(self, "_made_short", False) and count == 4:
            # the oldest job is kept 3 s (failure_ttl), the others RQ's default year: RQ's cleanup
            # expires the first, as a registry's expiry does in production
            producers.produce_rq(self.redis_url, "billing", 1, failure_ttl=self.short_lived)
            self._made_short = True
            count -= 1
        producers.produce_rq(self.redis_url, "billing", count)

    def in_store(self) -> list[str]:
        # the registry's score is the expiry: order by the job's `ended_at` (RQ's time of failure)
        ids = [m.decode() for m in self.sync_redis.zrange("rq:failed:billing", 0, -1)]
        ended = {i: (self.sync_redis.hget(f"rq:job:{i}", "ended_at") or b"").decode() for i in ids}
        return sorted(ids, key=lambda i: ended[i])

    def retry(self, job_id: str) -> None:
        producers.rq_failed_registry(self.redis_url, "billing", "requeue", job_id)

    def delete(self, job_id: str) -> None:
        producers.rq_failed_registry(self.redis_url, "billing", "delete", job_id)

    def trim_oldest(self, alive: int) -> None:
        import time

        time.sleep(self.short_lived + 0.5)  # the oldest job's failure_ttl runs out
        producers.rq_failed_registry(self.redis_url, "billing", "cleanup")


class TestResolveOff(BullMQKind):
    """`resolve_on_retry = false`: the retry goes unanswered, and nothing is held for it."""

    resolve = False

    async def test_a_retried_and_a_deleted_job_resolve_nothing_and_nothing_is_held(self) -> None:
        await asyncio.to_thread(self.produce, 2)
        self.start("leave-off")
        await self.wait_for(lambda: len(self.events("trigger")) >= 2, settle=False)
        first, second = await asyncio.to_thread(self.in_store)
        await asyncio.to_thread(self.retry, first)
        await asyncio.to_thread(self.delete, second)
        await asyncio.sleep(SETTLE_S)
        assert self.events("resolve") == []
        assert not list(self.sync_redis.scan_iter("dlq_bridge:cursor:*:held*")), "nothing held without a resolver"


class TestDramatiqLeaving(LeavingService):
    kind = "dramatiq"
    ttl_s: ClassVar[int] = 3600  # the broker's dead_message_ttl, as the app sets it and the table says

    def missing(self) -> str | None:
        return producers.dramatiq_missing()

    def table(self) -> dict[str, Any]:
        return {"queues": ["billing"], "dead_message_ttl_s": self.ttl_s}

    def produce(self, count: int) -> None:
        if count == 4:  # the oldest died two TTLs ago: the broker's maintenance will drop it
            producers.produce_dramatiq(self.redis_url, "billing", 1, age_s=2 * self.ttl_s)
            count -= 1
        producers.produce_dramatiq(self.redis_url, "billing", count)

    def in_store(self) -> list[str]:
        redis_ids = [m.decode() for m in self.sync_redis.zrange("dramatiq:billing.XQ", 0, -1)]
        bodies = self.sync_redis.hmget("dramatiq:billing.XQ.msgs", redis_ids) if redis_ids else []
        return [json.loads(body)["message_id"] for body in bodies if body]

    def retry(self, job_id: str) -> None:
        producers.dramatiq_dead_queue(self.redis_url, "billing", "requeue", job_id)

    def delete(self, job_id: str) -> None:
        producers.dramatiq_dead_queue(self.redis_url, "billing", "delete", job_id)

    def trim_oldest(self, alive: int) -> None:
        producers.dramatiq_dead_queue(self.redis_url, "billing", "maintain", str(self.ttl_s * 1000))
