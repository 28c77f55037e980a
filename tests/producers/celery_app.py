"""Celery test producer: a task that raises, on a queue whose dead-letter exchange feeds a DLQ.

`task_acks_late` with `task_acks_on_failure_or_timeout = False` makes Celery reject a failed
task's message without requeue, so RabbitMQ dead-letters it (x-death) into the DLQ.
Names come from the environment so every test run uses its own queues and exchanges.
"""

from __future__ import annotations

import os

from celery import Celery
from kombu import Exchange, Queue

BROKER = os.environ.get("DLQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
WORK_QUEUE = os.environ.get("DLQ_TEST_WORK_QUEUE", "dlqbridge-test.orders")
DLX = os.environ.get("DLQ_TEST_DLX", "dlqbridge-test.dlx")
DLQ = os.environ.get("DLQ_TEST_DLQ", "dlqbridge-test.orders.dlq")

app = Celery("dlqbridge_test", broker=BROKER)
app.conf.update(
    task_acks_late=True,
    task_acks_on_failure_or_timeout=False,
    task_default_queue=WORK_QUEUE,
    task_queues=[
        Queue(
            WORK_QUEUE,
            Exchange(WORK_QUEUE, type="direct"),
            routing_key=WORK_QUEUE,
            queue_arguments={"x-dead-letter-exchange": DLX, "x-dead-letter-routing-key": DLQ},
        )
    ],
    broker_connection_retry_on_startup=False,
    worker_hijack_root_logger=False,
)


class StockMissing(Exception):
    pass


@app.task(name="shop.reserve_stock")
def reserve_stock(order_id: int) -> None:
    raise StockMissing(f"no stock for order {order_id}")


if os.environ.get("DLQ_TEST_OTEL") == "1":  # traced by the real instrumentation (tests/kinds/test_trace_real.py)
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    CeleryInstrumentor().instrument()
