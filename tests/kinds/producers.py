"""Drive the real producer libraries so they dead-letter real jobs (issue 12).

Each `produce_*` returns when the library has put `count` jobs where its dead jobs go. Each
`*_missing()` returns why that kind cannot run here (None when it can), so a missing tool skips
only its own kind, with the reason printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from tests.support.bridge_process import terminate
from tests.support.peers import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]
PRODUCERS = ROOT / "tests" / "producers"
AMQP_URL = os.environ.get("DLQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


# --- Sidekiq: a Ruby worker raising (Debian ruby-sidekiq) ------------------------------------


def sidekiq_missing() -> str | None:
    if shutil.which("ruby") is None or shutil.which("sidekiq") is None:
        return f"sidekiq: no `ruby`/`sidekiq` on PATH (Debian package ruby-sidekiq; {INSTALL_HINT})"
    return None


def produce_sidekiq(redis_url: str, count: int, worker: str = "ChargeCardWorker", queue: str = "billing") -> None:
    """`count` jobs of `worker` (tests/producers/sidekiq/worker.rb), enqueued on `queue`, fail into the dead set."""
    env = {**os.environ, "REDIS_URL": redis_url}
    subprocess.run(["ruby", "enqueue.rb", str(count), worker, queue], cwd=PRODUCERS / "sidekiq", env=env,
                   check=True, timeout=60)
    client = redis.Redis.from_url(redis_url)
    before = int(client.zcard("dead"))
    worker = subprocess.Popen(
        ["sidekiq", "-r", "./worker.rb", "-q", queue, "-c", "1", "-t", "1"],
        cwd=PRODUCERS / "sidekiq",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: int(client.zcard("dead")) >= before + count, 60, "Sidekiq's dead set")
    finally:
        terminate(worker, timeout_s=15)
        client.close()


def sidekiq_dead_set(redis_url: str, *args: str) -> None:
    """Sidekiq's own API on the dead set (tests/producers/sidekiq/dead_set.rb): retry, delete, kill."""
    env = {**os.environ, "REDIS_URL": redis_url}
    subprocess.run(["ruby", "dead_set.rb", *args], cwd=PRODUCERS / "sidekiq", env=env, check=True, timeout=60)


# --- BullMQ: a Node worker throwing (npm bullmq, pinned by package-lock.json) -----------------


def bullmq_missing() -> str | None:
    if shutil.which("node") is None:
        return f"bullmq: no `node` on PATH ({INSTALL_HINT} needs Node and npm)"
    if not (PRODUCERS / "bullmq" / "node_modules" / "bullmq").is_dir():
        return f"bullmq: tests/producers/bullmq/node_modules is not installed ({INSTALL_HINT}: npm ci)"
    return None


def produce_bullmq(redis_url: str, queue: str, count: int, attempts: int = 2) -> None:
    subprocess.run(
        ["node", "produce.mjs", redis_url, queue, str(count), str(attempts)],
        cwd=PRODUCERS / "bullmq",
        check=True,
        timeout=60,
        stdout=subprocess.DEVNULL,
    )


def bullmq_failed_set(redis_url: str, queue: str, *args: str) -> None:
    """BullMQ's own API on a failed set (tests/producers/bullmq/failed_set.mjs): retry, remove, trim."""
    subprocess.run(["node", "failed_set.mjs", redis_url, queue, *args], cwd=PRODUCERS / "bullmq", check=True,
                   timeout=60, stdout=subprocess.DEVNULL)


# --- RQ: an RQ worker running a job that raises (PyPI rq) -------------------------------------


def rq_missing() -> str | None:
    if importlib.util.find_spec("rq") is None:
        return f"rq: the `rq` package is not installed ({INSTALL_HINT}: pip extra `peers`)"
    return None


def produce_rq(
    redis_url: str, queue: str, count: int, failure_ttl: int | None = None, job: str = "charge_card"
) -> list[str]:
    """Enqueue jobs that raise, then run a real `rq worker --burst` process over them.

    `failure_ttl`: how long RQ keeps each in its failed registry (RQ's default: a year);
    `job`: the function of tests/producers/rq_jobs.py the jobs run.
    """
    from rq import Queue

    client = redis.Redis.from_url(redis_url)
    try:
        rq_queue = Queue(queue, connection=client)
        jobs = [
            rq_queue.enqueue(f"tests.producers.rq_jobs.{job}", i + 1, token="tok-s3cret", failure_ttl=failure_ttl)
            for i in range(count)
        ]
        run_rq_burst(client, redis_url, queue)
    finally:
        client.close()
    return [job.id for job in jobs]


def run_rq_burst(client: redis.Redis, redis_url: str, queue: str) -> None:
    """A real `rq worker --burst` over `queue`, killed once it has registered its death.

    RQ 3.0's worker then stops its pub/sub thread, which can sit up to 60 s in a blocking read
    (`run_in_thread(sleep_time=60)`): a third of the suite's RQ productions took 60.5 s instead of
    0.3 s. Its jobs are all in the failed registry by then; nothing is left for it to do.
    """
    name = f"producer-{uuid.uuid4().hex[:12]}"
    worker = subprocess.Popen(
        [sys.executable, "-c", "from rq.cli import main; main()", "worker", "--burst", "--url", redis_url,
         "--worker-class", "rq.worker.SimpleWorker", "--name", name, "--quiet", queue],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: worker.poll() is not None or client.hexists(f"rq:worker:{name}", "death"), 120,
                  "RQ's burst worker")
        assert worker.poll() in (None, 0), f"rq worker exited with {worker.returncode}"
    finally:
        worker.kill()
        worker.wait(timeout=30)


def rq_failed_registry(redis_url: str, queue: str, action: str, *job_ids: str) -> None:
    """RQ's own API on a failed registry: `requeue` (what rq-dashboard and `rq requeue` do), `delete`
    (job.delete(), rq-dashboard's delete), or `cleanup` (RQ's removal of expired entries)."""
    from rq import Queue
    from rq.job import Job
    from rq.registry import FailedJobRegistry

    client = redis.Redis.from_url(redis_url)
    try:
        registry = FailedJobRegistry(queue=Queue(queue, connection=client))
        if action == "cleanup":
            registry.cleanup()
        for job_id in job_ids:
            if action == "requeue":
                registry.requeue(job_id)
            elif action == "delete":
                Job.fetch(job_id, connection=client).delete()
    finally:
        client.close()


# --- Dramatiq: a Worker running an actor that raises, on the RedisBroker (PyPI dramatiq) ------


def dramatiq_missing() -> str | None:
    if importlib.util.find_spec("dramatiq") is None:
        return f"dramatiq: the `dramatiq` package is not installed ({INSTALL_HINT}: pip extra `test`)"
    return None


def _dramatiq(*args: str) -> str:
    command = [sys.executable, "-m", "tests.producers.dramatiq_jobs", *args]
    done = subprocess.run(command, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True)
    return done.stdout


def produce_dramatiq(redis_url: str, queue: str, count: int, *, retries: int = 0, age_s: float = 0.0) -> list[str]:
    """Dead-letter `count` messages with a real Dramatiq Worker; their message ids, in order of death.
    `age_s`: the broker's clock runs that far behind (the message died that long ago)."""
    options = ["--retries", str(retries), "--age-s", str(age_s)]
    return _dramatiq("produce", redis_url, queue, str(count), *options).split()


def dramatiq_dead_queue(redis_url: str, queue: str, action: str, *args: str) -> None:
    """`requeue` / `delete` dead messages by message id, or `maintain` with a dead_message_ttl (ms)."""
    _dramatiq(action, redis_url, queue, *args)


# --- Celery on RabbitMQ: a task raising, rejected into a dead-letter exchange -----------------


def rabbitmq_missing() -> str | None:
    for module in ("celery", "aio_pika"):
        if importlib.util.find_spec(module) is None:
            return f"rabbitmq: the `{module}` package is not installed ({INSTALL_HINT}: pip extra `peers`)"
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            pass
    except OSError as exc:
        return f"rabbitmq: no RabbitMQ on 127.0.0.1:5672 ({exc.__class__.__name__})"
    return None


@dataclass(frozen=True)
class CeleryNames:
    """Queues and exchanges of one test, unique so no test touches another's data."""

    work_queue: str
    dlx: str
    dlq: str

    @classmethod
    def fresh(cls) -> CeleryNames:
        tag = f"dlqbridge-test-{uuid.uuid4().hex[:10]}"
        return cls(work_queue=f"{tag}.orders", dlx=f"{tag}.dlx", dlq=f"{tag}.orders.dlq")

    def env(self) -> dict[str, str]:
        return {
            "DLQ_TEST_AMQP_URL": AMQP_URL,
            "DLQ_TEST_WORK_QUEUE": self.work_queue,
            "DLQ_TEST_DLX": self.dlx,
            "DLQ_TEST_DLQ": self.dlq,
        }


def declare_celery(names: CeleryNames) -> None:
    from kombu import Connection, Exchange, Queue

    args = {"x-dead-letter-exchange": names.dlx, "x-dead-letter-routing-key": names.dlq}
    with Connection(AMQP_URL) as conn:
        channel = conn.channel()
        dlx = Exchange(names.dlx, type="direct", channel=channel)
        dlx.declare()
        Queue(names.dlq, dlx, routing_key=names.dlq, channel=channel).declare()
        work = Exchange(names.work_queue, type="direct", channel=channel)
        Queue(names.work_queue, work, routing_key=names.work_queue, queue_arguments=args, channel=channel).declare()


def dlq_count(names: CeleryNames) -> int:
    from kombu import Connection

    with Connection(AMQP_URL) as conn:
        _, count, _ = conn.channel().queue_declare(names.dlq, passive=True)
        return int(count)


CELERY_WORKER = [
    sys.executable,
    "-m",
    "celery",
    "-A",
    "tests.producers.celery_app",
    "worker",
    "--pool=solo",
    "-l",
    "error",
]


def produce_celery(names: CeleryNames, count: int) -> list[str]:
    """Send `count` tasks and run a real Celery worker until all are dead-lettered."""
    env = {**os.environ, **names.env()}
    code = (
        "import sys; from tests.producers.celery_app import reserve_stock; "
        "print(' '.join(reserve_stock.delay(i + 1).id for i in range(int(sys.argv[1]))))"
    )
    sent = subprocess.run(
        [sys.executable, "-c", code, str(count)], cwd=ROOT, env=env, check=True, timeout=60, capture_output=True
    )
    work_until_dead(names, env, count)
    return sent.stdout.decode().split()


def work_until_dead(names: CeleryNames, env: dict[str, str], count: int) -> None:
    """Run a real Celery worker on the work queue until `count` tasks are dead-lettered."""
    worker = subprocess.Popen(
        [
            *CELERY_WORKER,
            "-l",
            "error",
            "-Q",
            names.work_queue,
            # A node name of its own: two workers named celery@<host> at once (two tests on two
            # xdist workers) clash on their remote-control queue, and one never consumed (1 in 2
            # concurrent productions waited out the whole timeout).
            "-n",
            f"producer-{uuid.uuid4().hex[:12]}@%h",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # 90 s: a cold worker on a loaded machine (16-22 s seen at load 5)
        _wait_for(lambda: dlq_count(names) >= count, 90, "Celery's dead-letter queue")
    finally:
        # Every task has been rejected into the DLQ (or the wait failed): nothing is left for the
        # worker to finish, and its warm (or cold) shutdown waits ~10 s on the broker connection.
        worker.kill()
        worker.wait(timeout=30)


def delete_celery(names: CeleryNames) -> None:
    from kombu import Connection

    with Connection(AMQP_URL) as conn:
        channel = conn.channel()
        for queue in (names.dlq, names.work_queue):
            channel.queue_delete(queue)
        for exchange in (names.dlx, names.work_queue):
            channel.exchange_delete(exchange)


# --- SQS through moto ------------------------------------------------------------------------


def sqs_missing() -> str | None:
    for module in ("moto", "boto3", "flask"):
        if importlib.util.find_spec(module) is None:
            return f"sqs: the `{module}` package is not installed ({INSTALL_HINT}: pip extra `peers`, moto[server])"
    return None


class MotoSqs:
    """A local SQS endpoint (moto's server) on a free port, and a source queue redriving into a DLQ."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto keeps its queues per process, not per server: start from none (an earlier test may leave some)
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10)
        self.client = self.make_client()
        self.dlq_url = self.client.create_queue(QueueName="orders-dlq")["QueueUrl"]
        arn = self.client.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])
        policy = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": "2"}
        self.work_url = self.client.create_queue(QueueName="orders", Attributes={"RedrivePolicy": json.dumps(policy)})[
            "QueueUrl"
        ]

    def make_client(self) -> Any:
        import boto3

        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def produce(self, count: int, start: int = 0) -> list[str]:
        """Send jobs; a worker receives each and fails (no delete) until SQS moves it to the DLQ."""
        ids = []
        for i in range(start, start + count):
            body = {"job_id": f"order-{i + 1}", "job_name": "ship_order", "last_error": "KeyError: 'sku'"}
            self.client.send_message(QueueUrl=self.work_url, MessageBody=json.dumps(body))
            ids.append(f"order-{i + 1}")
        for _ in range(count * 4):
            reply = self.client.receive_message(QueueUrl=self.work_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
            if not reply.get("Messages") and self.dlq_depth() >= count:
                break
        return ids

    def dlq_depth(self) -> int:
        attrs = self.client.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attrs["Attributes"]["ApproximateNumberOfMessages"])

    def stop(self) -> None:
        self._server.stop()
