"""The real producers, traced by their real instrumentations: each returns {job id: trace id}.

- Celery: `opentelemetry-instrumentation-celery` with the OpenTelemetry SDK injects `traceparent`
  into the AMQP headers of each task message (`tests/producers/celery_app.py`, `DLQ_TEST_OTEL=1`);
- BullMQ: `bullmq-otel` with the OpenTelemetry Node SDK writes `opts.tm` and `tm`
  (`tests/producers/bullmq/produce_traced.mjs`);
- Sidekiq: a client middleware writes `traceparent` into the job hash as the OpenTelemetry Sidekiq
  instrumentation does (`tests/producers/sidekiq/enqueue_traced.rb`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import redis

from tests.kinds import producers
from tests.kinds.producers import PRODUCERS, ROOT, CeleryNames
from tests.support.bridge_process import terminate
from tests.support.peers import INSTALL_HINT


def celery_otel_missing() -> str | None:
    for module in ("opentelemetry.instrumentation.celery", "opentelemetry.sdk"):
        if not _installed(module):
            return f"celery tracing: `{module}` is not installed ({INSTALL_HINT}: pip extra `peers`)"
    return producers.rabbitmq_missing()


def _installed(module: str) -> bool:
    """find_spec of a dotted name imports its parents, and raises when one of them is missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def bullmq_otel_missing() -> str | None:
    if not (PRODUCERS / "bullmq" / "node_modules" / "bullmq-otel").is_dir():
        return f"bullmq tracing: npm bullmq-otel is not installed ({INSTALL_HINT}: npm ci)"
    return producers.bullmq_missing()


_CELERY_SEND = """
import json, sys
from opentelemetry import trace
from tests.producers.celery_app import reserve_stock
tracer = trace.get_tracer("checkout")
sent = {}
for i in range(int(sys.argv[1])):
    with tracer.start_as_current_span("checkout") as span:
        sent[reserve_stock.delay(i + 1).id] = format(span.get_span_context().trace_id, "032x")
print(json.dumps(sent))
"""


def produce_celery(names: CeleryNames, count: int) -> dict[str, str]:
    """`count` traced tasks, dead-lettered by a real (traced) Celery worker."""
    env = {**os.environ, **names.env(), "DLQ_TEST_OTEL": "1"}
    sent = subprocess.run(
        [sys.executable, "-c", _CELERY_SEND, str(count)], cwd=ROOT, env=env, check=True, timeout=60, capture_output=True
    )
    producers.work_until_dead(names, env, count)
    return dict(json.loads(sent.stdout))


def produce_bullmq(redis_url: str, queue: str, count: int) -> dict[str, str]:
    done = subprocess.run(
        ["node", "produce_traced.mjs", redis_url, queue, str(count)],
        cwd=PRODUCERS / "bullmq",
        check=True,
        timeout=60,
        capture_output=True,
    )
    return dict(json.loads(done.stdout)["traces"])


def produce_sidekiq(redis_url: str, count: int, queue: str = "billing") -> dict[str, str]:
    env = {**os.environ, "REDIS_URL": redis_url}
    sent = subprocess.run(
        ["ruby", "enqueue_traced.rb", str(count), queue],
        cwd=PRODUCERS / "sidekiq",
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
    )
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
        producers._wait_for(lambda: int(client.zcard("dead")) >= before + count, 60, "Sidekiq's dead set")
    finally:
        terminate(worker, timeout_s=15)
        client.close()
    return dict(json.loads(sent.stdout.decode().strip().splitlines()[-1]))
