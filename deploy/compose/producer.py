"""A sample producer for the compose trial: parks a dead letter every few seconds.

Writes the shapes real workers write (DESIGN section 3): the envelope shape,
the reliable-queue shape (no error text), and raw bytes that are not JSON.

    python producer.py --url redis://redis:6379/0 --every 10
    python producer.py --url redis://127.0.0.1:6379/0 --count 3     # three, then exit
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import uuid
from datetime import UTC, datetime

import redis

ERRORS = [
    ("orders", "ship_order", "TimeoutError: warehouse API timed out after 30s"),
    ("payments", "capture_payment", "HTTP 429 Too Many Requests from the card processor"),
    ("emails", "send_receipt", "ConnectionRefusedError: [Errno 111] smtp:25"),
    ("reports", "build_report", "MemoryError: worker killed (OOMKilled)"),
]


def envelope(n: int) -> tuple[str, bytes]:
    queue, job, error = ERRORS[n % len(ERRORS)]
    body = {
        "queue": queue, "job_id": f"{queue}-{uuid.uuid4().hex[:8]}", "job_name": job,
        "attempts": 5, "correlation_id": uuid.uuid4().hex, "last_error": error,
        "first_failed_at": datetime.now(UTC).isoformat(), "payload_excerpt": json.dumps({"n": n}),
    }
    return f"dead_letter:{queue}", json.dumps(body).encode()


def reliable(n: int) -> tuple[str, bytes]:
    body = {"task_id": f"task-{n}", "job_type": "resize_image", "params": {"id": n}, "attempts": 3}
    return "dead_letter:images", json.dumps(body).encode()


def raw(n: int) -> tuple[str, bytes]:
    return "dead_letter:images", f"not json: legacy job {n}".encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between dead letters")
    parser.add_argument("--count", type=int, default=0, help="stop after this many (0: run forever)")
    args = parser.parse_args()
    client = redis.Redis.from_url(args.url)
    makers = [envelope, envelope, reliable, envelope, raw]
    for n in itertools.count():
        if args.count and n >= args.count:
            break
        key, body = makers[n % len(makers)](n)
        client.lpush(key, body)
        print(f"producer: LPUSH {key} ({len(body)} bytes)", flush=True)
        if not args.count:
            time.sleep(args.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
