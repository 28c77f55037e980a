"""Dramatiq test producer: a real RedisBroker and Worker running an actor that raises.

`python -m tests.producers.dramatiq_jobs produce <redis_url> <queue> <count> [--age-s S] [--retries N]`
sends `count` messages, runs a Dramatiq Worker until each has died into `dramatiq:<queue>.XQ`, and
prints their message ids. `--age-s` runs the broker's clock that many seconds behind (the death time
Dramatiq records), as a message that died long ago. `maintain <redis_url> <queue> <ttl_ms>` runs the
broker's own maintenance with that `dead_message_ttl` (the trim of old dead messages).
`requeue|delete <redis_url> <queue> <message_id>...`: what dramatiq-dashboard and requeue scripts do
(Dramatiq itself has no call for it): the dead message enqueued again with `broker.enqueue`, or
dropped, and removed from the dead-letter queue.
"""

from __future__ import annotations

import argparse
import time

import dramatiq
import redis
from dramatiq.brokers import redis as redis_broker
from dramatiq.brokers.redis import MAINTENANCE_SCALE, RedisBroker
from dramatiq.message import Message

NAMESPACE = "dramatiq"


class CardDeclined(Exception):
    pass


def charge_card(order_id: int, *, token: str = "") -> None:
    raise CardDeclined(f"card declined for order {order_id}")


def _broker(url: str, **options: int) -> RedisBroker:
    broker = RedisBroker(url=url, namespace=NAMESPACE, **options)
    dramatiq.set_broker(broker)
    return broker


def _dead_count(client: redis.Redis, queue: str) -> int:
    return int(client.zcard(f"{NAMESPACE}:{queue}.XQ"))


def produce(url: str, queue: str, count: int, retries: int, age_s: float) -> list[str]:
    if age_s:
        shifted = redis_broker.current_millis
        redis_broker.current_millis = lambda: shifted() - int(age_s * 1000)  # type: ignore[attr-defined]
    broker = _broker(url)
    actor = dramatiq.actor(charge_card, queue_name=queue, max_retries=retries, min_backoff=10, max_backoff=50)
    client = redis.Redis.from_url(url)
    target = _dead_count(client, queue) + count
    sent = [actor.send(i + 1, token="tok-s3cret").message_id for i in range(count)]
    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=100)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while _dead_count(client, queue) < target:
            if time.monotonic() > deadline:
                raise TimeoutError("the messages did not die")
            time.sleep(0.05)
    finally:
        worker.stop()
        broker.close()
    return sent


def maintain(url: str, queue: str, ttl_ms: int) -> None:
    broker = _broker(url, dead_message_ttl=ttl_ms, maintenance_chance=MAINTENANCE_SCALE)
    broker.do_qsize(queue)  # any command but ack/nack runs maintenance at this chance
    broker.close()


def by_hand(url: str, queue: str, action: str, message_ids: list[str]) -> None:
    """Requeue (`broker.enqueue` of the decoded dead message) or delete dead messages, by message id."""
    broker = _broker(url)
    client = redis.Redis.from_url(url)
    dead, bodies = f"{NAMESPACE}:{queue}.XQ", f"{NAMESPACE}:{queue}.XQ.msgs"
    for redis_id, body in client.hgetall(bodies).items():
        message = Message.decode(body)
        if message.message_id not in message_ids:
            continue
        if action == "requeue":
            broker.enqueue(message.copy(queue_name=queue))
        with client.pipeline() as pipe:
            pipe.zrem(dead, redis_id).hdel(bodies, redis_id).execute()
    broker.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["produce", "maintain", "requeue", "delete"])
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("items", nargs="+")
    parser.add_argument("--age-s", type=float, default=0.0)
    parser.add_argument("--retries", type=int, default=0)
    args = parser.parse_args()
    if args.action == "maintain":
        maintain(args.url, args.queue, int(args.items[0]))
    elif args.action == "produce":
        print("\n".join(produce(args.url, args.queue, int(args.items[0]), args.retries, args.age_s)))
    else:
        by_hand(args.url, args.queue, args.action, args.items)


if __name__ == "__main__":
    main()
