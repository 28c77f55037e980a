"""Each kind through the real service: the real producer dead-letters real jobs, `dlq-bridge run` alerts.

Per kind (issue 12): one alert per dead job at a webhook (group_by none) with the right envelope
fields and an Idempotency-Key `<queue>:<job_id>`; nothing removed from owner-held stores;
exactly once across a restart; exactly once with two replicas running at the same time.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import redis

from bridge.sources.kind_registry import KindSources
from bridge.stores import keys
from tests.kinds import producers
from tests.support.bridge_process import kill9, start_bridge, terminate, wait_healthz
from tests.support.http_server import serve
from tests.support.receiver import Receiver
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow

WAIT_S = 90.0
SETTLE_S = 1.5  # after the last expected alert: time for a wrong repeat to show up
LEASE_S = 30  # watched leases and the SQS visibility timeout: long enough for a loaded 2-core machine
KILL9_LEASE_S = 5  # in the kill -9 test: what the killed bridge held comes back after this


def toml_value(value: Any) -> str:
    return json.dumps(value)


def config_text(redis_url: str, consumer: str, port: int, hook_url: str, kind: str, table: dict[str, Any]) -> str:
    lines = [
        "[server]",
        f"port = {port}",
        "grace_s = 10",
        "[redis]",
        f"url = {toml_value(redis_url)}",
        f"consumer_id = {toml_value(consumer)}",
        "[sources]",
        'match = ""',
        "rescan_interval_s = 0.5",
        "[delivery]",
        "base_delay_s = 0.01",
        "max_delay_s = 0.05",
        "[[sinks]]",
        'name = "api"',
        'type = "webhook"',
        f"url = {toml_value(hook_url)}",
        'secret = "kind-secret"',
        'group_by = "none"',
        f"[[sources.{kind}]]",
        *(f"{k} = {toml_value(v)}" for k, v in table.items()),
    ]
    return "\n".join(lines) + "\n"


class KindService:
    """Subclasses: how to dead-letter jobs with the real library, and the kind's table."""

    kind: ClassVar[str] = ""
    owner_held: ClassVar[bool] = False
    expected_queue: ClassVar[str] = ""
    expected_job_name: ClassVar[str] = ""
    error_text: ClassVar[str] = ""
    lease_s: int = LEASE_S

    def missing(self) -> str | None:
        return None

    def table(self) -> dict[str, Any]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def produce(self, count: int) -> None:
        raise NotImplementedError

    def dump(self) -> Any:
        """The owner-held store, byte for byte."""
        return None

    def depth(self) -> int:
        """What is still waiting in a consumable store."""
        return 0

    def setup_kind(self) -> None:
        return None

    def teardown_kind(self) -> None:
        return None

    @pytest.fixture(autouse=True)
    async def _service(
        self, redis_url: str, clean_redis: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[None]:
        reason = self.missing()
        if reason:
            pytest.skip(reason)
        self.redis_url, self.sync_redis, self.tmp = redis_url, clean_redis, tmp_path
        for name, value in self.env().items():
            monkeypatch.setenv(name, value)
        self.setup_kind()
        self.hook = Receiver()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        try:
            async with serve(self.hook.app) as base:
                self.hook_url = f"{base}/hooks"
                yield
                for proc in self.procs:
                    stop(proc)
        finally:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.teardown_kind()

    def start(self, *consumers: str) -> list[subprocess.Popen[bytes]]:
        """Start one bridge per consumer id at once, then wait until each one answers /healthz."""
        started = []
        for consumer in consumers:
            port = free_port()
            path = self.tmp / f"{consumer}.toml"
            path.write_text(config_text(self.redis_url, consumer, port, self.hook_url, self.kind, self.table()))
            proc = start_bridge(["--config", str(path), "run"])
            self.procs.append(proc)
            self.ports.append(port)
            started.append((port, proc))
        for port, proc in started:
            wait_healthz(port, proc)
        return [proc for _, proc in started]

    def alerts(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.hook.requests if 200 <= r.status < 300]

    async def wait_for(self, check: Callable[[], bool], *, settle: bool = True) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not check():
            if loop.time() > deadline:
                got = Counter(a["job_id"] for a in self.alerts())
                raise AssertionError(f"timed out; alerts so far: {dict(got)}")
            await asyncio.sleep(0.1)
        if settle:
            await asyncio.sleep(SETTLE_S)

    def source_name(self) -> str:
        return KindSources.model_validate({self.kind: [self.table()]}).all()[0].source_name()

    def metric_depth(self) -> float | None:
        text = httpx.get(f"http://127.0.0.1:{self.ports[-1]}/metrics", timeout=5).text
        series = f'dlq_bridge_dlq_depth{{source="{self.source_name()}"}} '
        for line in text.splitlines():
            if line.startswith(series):
                return float(line[len(series) :])
        return None

    def check_alert(self, alert: dict[str, Any]) -> None:
        assert alert["queue"] == self.expected_queue
        assert alert["job_name"] == self.expected_job_name
        assert self.error_text in (alert["last_error"] or "")
        assert alert["attempts"] is not None and alert["attempts"] >= 1
        assert alert["parse_error"] is None
        assert alert["idempotency_key"] == f"{self.expected_queue}:{alert['job_id']}"

    # --- the tests ----------------------------------------------------------------------
    async def test_one_alert_per_dead_job_nothing_removed_and_once_across_a_restart(self) -> None:
        await asyncio.to_thread(self.produce, 3)
        before = self.dump()
        [first] = self.start("kind-a")
        await self.wait_for(lambda: len(self.alerts()) >= 3)
        alerts = self.alerts()
        assert len(alerts) == 3, "one alert per dead job"
        assert len({a["job_id"] for a in alerts}) == 3
        for alert in alerts:
            self.check_alert(alert)
        await self.wait_for(lambda: self.metric_depth() == 0.0)  # /metrics: one depth series per kind source
        assert self.sync_redis.llen(keys.alerted(self.source_name())) == 3, "the archive keeps each record"
        stop(first)
        if self.owner_held:
            assert self.dump() == before, "the job system's store is unchanged"
        else:
            assert self.depth() == 0, "every consumed record was acknowledged"

        await asyncio.to_thread(self.produce, 1)  # one more while the bridge is down
        self.start("kind-a")
        await self.wait_for(lambda: len(self.alerts()) >= 4)
        counts = Counter(a["job_id"] for a in self.alerts())
        assert len(counts) == 4 and set(counts.values()) == {1}, f"exactly once across a restart: {counts}"

    async def test_kill9_mid_run_loses_nothing(self) -> None:
        """kill -9 after the first alert; the restarted bridge alerts the rest. A repeat is possible only
        for a send the ledger had not recorded yet, and then it carries the same Idempotency-Key."""
        self.lease_s = KILL9_LEASE_S
        await asyncio.to_thread(self.produce, 5)
        [victim] = self.start("kind-k")
        await self.wait_for(lambda: len(self.alerts()) >= 1, settle=False)
        kill9(victim)
        self.start("kind-k")
        await self.wait_for(lambda: len({a["job_id"] for a in self.alerts()}) >= 5)
        keys_by_job: dict[str, set[str]] = {}
        for alert in self.alerts():
            keys_by_job.setdefault(alert["job_id"], set()).add(alert["idempotency_key"])
        assert len(keys_by_job) == 5, "every dead job alerted"
        assert all(len(k) == 1 for k in keys_by_job.values())

    async def test_two_replicas_alert_each_dead_job_once(self) -> None:
        await asyncio.to_thread(self.produce, 4)
        self.start("kind-r1", "kind-r2")  # both start on the same dead jobs
        await self.wait_for(lambda: len(self.alerts()) >= 4)
        counts = Counter(a["job_id"] for a in self.alerts())
        assert len(counts) == 4 and set(counts.values()) == {1}, f"exactly once with two replicas: {counts}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    terminate(proc, timeout_s=30)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.read().decode()[-2000:] if proc.stderr else ""


# --- owner-held kinds ------------------------------------------------------------------------


class TestSidekiqService(KindService):
    kind = "sidekiq"
    owner_held = True
    expected_queue = "billing"
    expected_job_name = "ChargeCardWorker"
    error_text = "card declined for order"

    def missing(self) -> str | None:
        return producers.sidekiq_missing()

    def table(self) -> dict[str, Any]:
        return {"lease_s": self.lease_s}

    def produce(self, count: int) -> None:
        producers.produce_sidekiq(self.redis_url, count)

    def dump(self) -> Any:
        return self.sync_redis.zrange("dead", 0, -1, withscores=True)


class TestBullMQService(KindService):
    kind = "bullmq"
    owner_held = True
    expected_queue = "invoices"
    expected_job_name = "send-invoice"
    error_text = "invoice for order"

    def missing(self) -> str | None:
        return producers.bullmq_missing()

    def table(self) -> dict[str, Any]:
        return {"prefix": "bull", "queues": ["invoices"], "lease_s": self.lease_s}

    def produce(self, count: int) -> None:
        producers.produce_bullmq(self.redis_url, "invoices", count, 2)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("bull:invoices:*") if not k.endswith(b":events"))
        return {k: self.sync_redis.dump(k) for k in keys}


class TestRQService(KindService):
    kind = "rq"
    owner_held = True
    expected_queue = "billing"
    expected_job_name = "tests.producers.rq_jobs.charge_card"
    error_text = "card declined for order"

    def missing(self) -> str | None:
        return producers.rq_missing()

    def table(self) -> dict[str, Any]:
        return {"queues": ["billing"], "lease_s": self.lease_s}

    def produce(self, count: int) -> None:
        producers.produce_rq(self.redis_url, "billing", count)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("rq:*") if not k.startswith(b"rq:worker"))
        return {k: self.sync_redis.dump(k) for k in keys if self.sync_redis.type(k) != b"string"}


class TestDramatiqService(KindService):
    kind = "dramatiq"
    owner_held = True
    expected_queue = "billing"
    expected_job_name = "charge_card"
    error_text = "card declined for order"

    def missing(self) -> str | None:
        return producers.dramatiq_missing()

    def table(self) -> dict[str, Any]:
        return {"queues": ["billing"], "lease_s": self.lease_s}

    def produce(self, count: int) -> None:
        producers.produce_dramatiq(self.redis_url, "billing", count, retries=1)

    def dump(self) -> Any:
        keys = sorted(k for k in self.sync_redis.scan_iter("dramatiq:*") if not k.startswith(b"dramatiq:__"))
        return {k: self.sync_redis.dump(k) for k in keys}


# --- consumable kinds ------------------------------------------------------------------------


class TestRedisStreamService(KindService):
    kind = "redis_stream"
    expected_queue = "dead_letters"
    expected_job_name = "ship_order"
    error_text = "warehouse API timed out"

    def table(self) -> dict[str, Any]:
        return {"stream": "dead_letters", "group": "dlq-bridge", "min_idle_s": 30}

    def produce(self, count: int) -> None:
        start = int(self.sync_redis.xlen("dead_letters"))
        for i in range(start, start + count):
            letter = {
                "queue": "orders",
                "job_id": f"job-{i + 1}",
                "job_name": "ship_order",
                "attempts": 3,
                "last_error": "TimeoutError: warehouse API timed out after 30s",
                "first_failed_at": "2026-11-30T00:00:00+00:00",
            }
            self.sync_redis.xadd("dead_letters", {"payload": json.dumps(letter)})

    def depth(self) -> int:
        groups = self.sync_redis.xinfo_groups("dead_letters")
        return sum(int(g["pending"]) + int(g.get("lag") or 0) for g in groups)


class TestRabbitMQCeleryService(KindService):
    kind = "rabbitmq"
    expected_job_name = "shop.reserve_stock"
    error_text = "rejected"

    def missing(self) -> str | None:
        return producers.rabbitmq_missing()

    def setup_kind(self) -> None:
        self.names = producers.CeleryNames.fresh()
        producers.declare_celery(self.names)
        self.expected_queue = self.names.work_queue  # type: ignore[misc]

    def teardown_kind(self) -> None:
        producers.delete_celery(self.names)

    def env(self) -> dict[str, str]:
        return {"RABBITMQ_URL": producers.AMQP_URL}

    def table(self) -> dict[str, Any]:
        return {"queue": self.names.dlq}

    def produce(self, count: int) -> None:
        producers.produce_celery(self.names, count)

    def depth(self) -> int:
        return producers.dlq_count(self.names)


class TestSqsService(KindService):
    kind = "sqs"
    expected_queue = "orders-dlq"
    expected_job_name = "ship_order"
    error_text = "'sku'"

    def missing(self) -> str | None:
        return producers.sqs_missing()

    def setup_kind(self) -> None:
        self.sqs = producers.MotoSqs()
        self.produced = 0

    def teardown_kind(self) -> None:
        self.sqs.stop()

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}

    def table(self) -> dict[str, Any]:
        return {"queue_url": self.sqs.dlq_url, "endpoint_url": self.sqs.endpoint, "visibility_timeout_s": self.lease_s}

    def produce(self, count: int) -> None:
        self.sqs.produce(count, start=self.produced)
        self.produced += count

    def depth(self) -> int:
        return self.sqs.dlq_depth()
