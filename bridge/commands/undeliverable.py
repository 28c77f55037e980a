"""`dlq-bridge undeliverable [list|retry]`: inspect and re-deliver failed deliveries.

`list` shows the records in `dlq_bridge:undeliverable` (newest first): age,
sink, status, attempts, idempotency key and error; bodies are not printed.
`retry` rebuilds each record's Alert and delivers it again to its sink
(oldest first), through the ledger, so a sink that meanwhile got it is not
sent it twice. A record is removed (LREM of its exact string) only after
its sink accepted the alert; a failed retry leaves the record as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, TextIO

import redis.asyncio as redis

from bridge.clients.http import build_http_client
from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    no_such_sink,
    one_line,
    open_redis,
    redis_error,
    render_table,
)
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.delivery.assembly import build_ledger, build_routes
from bridge.delivery.redeliver import retry_all
from bridge.delivery.send import Deliverer, Route
from bridge.settings import Settings
from bridge.stores.fleet import live_replicas
from bridge.stores.undeliverable_records import Stored, UndeliverableStore

EPILOG = """examples:
  dlq-bridge undeliverable                         # list (same as `list`)
  dlq-bridge undeliverable list --sink slack-ops --limit 50
  dlq-bridge undeliverable retry                   # re-deliver every record, oldest first
  dlq-bridge undeliverable retry --sink pagerduty --limit 10 --attempts 5

exit codes: 0 ok (retry: every tried record delivered), 1 a retry failed or Redis
error, 2 bad configuration or usage, 4 --sink names no configured sink and no record
"""


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    add = parser.add_argument
    add("action", nargs="?", choices=["list", "retry"], default="list", help="default: list")
    add("--sink", metavar="NAME", help="only records of this sink")
    add("--limit", type=int, default=None, metavar="N", help="at most N records")
    add("--attempts", type=int, default=3, metavar="N", help="retry: attempts per record (default 3)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        if args.action == "retry":
            return asyncio.run(retry(settings, args.sink, args.limit, args.attempts, sys.stdout))
        return asyncio.run(list_records(settings, args.sink, args.limit, sys.stdout))
    except redis.RedisError as exc:
        print(redis_error("undeliverable", settings, exc), file=sys.stderr)
        return EXIT_FAILED


def _matching(stored: list[Stored], sink: str | None, limit: int | None) -> list[Stored]:
    chosen = [s for s in stored if sink is None or s.record.get("sink") == sink]
    return chosen if limit is None else chosen[: max(limit, 0)]


def unknown_sink(settings: Settings, sink: str | None, stored: list[Stored]) -> str:
    """The not-found line when `sink` is neither configured nor named by any record; else ""."""
    configured = [s.name for s in settings.effective_sinks()]
    if sink is None or sink in configured or any(s.record.get("sink") == sink for s in stored):
        return ""
    return no_such_sink([sink], configured)


async def list_records(settings: Settings, sink: str | None, limit: int | None, out: TextIO) -> int:
    async with open_redis(settings) as client:
        every = await UndeliverableStore(client).records()
    problem = unknown_sink(settings, sink, every)
    if problem:
        print(f"undeliverable: {problem}", file=sys.stderr)
        return EXIT_NOT_FOUND
    stored = _matching(every, sink, limit)
    if not stored:
        print("no undeliverable records" + (f" for sink {sink}" if sink else ""), file=out)
        return EXIT_OK
    now = time.time()
    rows = [_row(s.record, now) for s in stored]
    print(render_table(["AGE", "SINK", "STATUS", "ATTEMPTS", "KEY", "ERROR"], rows), file=out)
    return EXIT_OK


def _row(record: dict[str, Any], now: float) -> list[str]:
    at = record.get("at")
    age = _age(now - at) if isinstance(at, (int, float)) else "?"
    status = record.get("status")
    key = record.get("idempotency_key") or record.get("source_key") or "?"
    return [age, str(record.get("sink", "?")), "-" if status is None else str(status),
            str(record.get("attempts", "-")), one_line(str(key), 60),
            one_line(str(record.get("error", "")), 80)]


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"


async def retry(
    settings: Settings, sink: str | None, limit: int | None, attempts: int, out: TextIO
) -> int:
    delivery = settings.delivery.model_copy(update={"max_attempts": max(attempts, 1)})
    http = build_http_client(settings.http)
    try:
        async with open_redis(settings) as client:
            routes = {r.sink.name: r for r in build_routes(settings, http, out, client=client)}
            ledger = build_ledger(settings, client, owner=f"{settings.redis.consumer_id}.cli")
            deliverer = Deliverer(delivery, ledger, Metrics(), Health())
            store = UndeliverableStore(client)
            store.formats.follow([r.reads for r in await live_replicas(client)])  # 0.1.0 replicas read format 1
            every = list(reversed(await store.records()))
            problem = unknown_sink(settings, sink, every)
            if problem:
                print(f"undeliverable: {problem}", file=sys.stderr)
                return EXIT_NOT_FOUND
            stored = _matching(every, sink, limit)
            if not stored:
                print("no undeliverable records to retry", file=out)
                return EXIT_OK
            failed = await _retry_each(stored, routes, deliverer, store, out)
    finally:
        await http.aclose()
    print(f"undeliverable retry: {len(stored) - failed} delivered, {failed} not", file=out)
    return EXIT_FAILED if failed else EXIT_OK


async def _retry_each(
    stored: list[Stored],
    routes: dict[str, Route],
    deliverer: Deliverer,
    store: UndeliverableStore,
    out: TextIO,
) -> int:
    done = await retry_all(stored, routes, deliverer, store)
    for r in done:
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.item.record.get('sink', '?')} "
              f"{one_line(str(r.item.record.get('idempotency_key', '?')), 60)}: {r.message}", file=out)
    return sum(1 for r in done if not r.ok)
