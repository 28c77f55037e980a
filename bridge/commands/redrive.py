"""`dlq-bridge redrive QUEUE`: entries back to their work queue, through the one redrive operation
(bridge.redrive.operation.Redrive, which the console's actions use too).

By default it reads the archive (`dlq_bridge:alerted:<ref>`: what the bridge alerted on; a running
bridge drains the DLQ within seconds), `--from-dlq` the DLQ itself, `--quarantine` the quarantine
list. One Lua script per entry removes exactly that entry from the list it is read from and pushes
it onto the work queue, so a crash or `kill -9` at any instant leaves every entry in exactly one
of the two lists. An archived entry that moved gets the resolves of every sink that resolves
(PagerDuty, Alertmanager) queued, and the act recorded on it; the run lands in the audit list as
`cli:<login>`. On Redis Cluster, a work queue in another slot than its DLQ is reached through a
staging list (`dlq_bridge:redrive:<ref>`): never lost, at worst pushed twice.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time
from collections.abc import Callable

import redis.asyncio as redis

from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    close_queues,
    did_you_mean,
    open_redis,
    redis_error,
    resolve_source,
)
from bridge.core import names
from bridge.redrive import messages
from bridge.redrive.operation import Outcome, Redrive, default_resolver
from bridge.settings import Settings
from bridge.sources import refs as kind_sources
from bridge.stores.archive import archive_key, quarantine_key
from bridge.stores.requeue import Plan, quarantine_plan

CHUNK = 500
PROGRESS_EVERY_S = 1.0

EPILOG = """examples:
  dlq-bridge redrive orders --dry-run          # what would move from the archive of dead_letter:orders
  dlq-bridge redrive orders --job-id pay-1     # that alerted job back onto orders, its incidents resolved
  dlq-bridge redrive orders --limit 100        # the 100 oldest archived entries
  dlq-bridge redrive orders --from-dlq         # entries still in dead_letter:orders (the bridge not running)
  dlq-bridge redrive dead_letter:{carts}:eu --to {carts}:eu:jobs
  dlq-bridge redrive orders --quarantine --dry-run   # what is quarantined for dead_letter:orders
  dlq-bridge redrive orders --quarantine       # dlq_bridge:quarantine:… -> dead_letter:orders

It reads the archive by default: the entries the bridge claimed and alerted on
(a running bridge drains a DLQ within seconds). --from-dlq reads the DLQ itself,
--quarantine the quarantine list. Oldest entries move first. Each entry is
LPUSHed onto the work queue (the DLQ key without `dead_letter:` unless --to is
given) with its attempt counter reset to 0 (JSON objects; other bytes move
unchanged). One atomic Lua script per entry: a kill at any moment loses and
duplicates nothing. On Redis Cluster, a work queue in another slot than its DLQ
is reached through a staging list (dlq_bridge:redrive:<ref>): a kill there may
push an entry twice, never lose it.

An archived entry that moved has a resolve queued for every sink its alert went
to that resolves (PagerDuty, Alertmanager with resolve_on_retry), as a redrive
from the console does, and the run is recorded in the audit list as cli:<login>.

--quarantine takes the entries the bridge quarantined (dlq_bridge:quarantine:<ref>,
kept byte for byte) and pushes them back, unchanged, onto their DLQ, so the bridge
claims and alerts on them again as new entries: fix what killed the bridge first.

exit codes: 0 done (also when nothing matched: the line says which list was
read and what holds entries), 1 Redis error or interrupted, 2 bad configuration
or usage, 4 not found: neither the DLQ, its archive, its quarantine list nor
its work queue exists, or a given --job-id matched no entry (named on stderr)
"""


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    add = parser.add_argument
    add("queue", help="queue name (orders) or DLQ key (dead_letter:orders)")
    add("--to", metavar="KEY", help="work queue key (default: the DLQ key without dead_letter:)")
    origin = parser.add_mutually_exclusive_group()
    origin.add_argument("--from-archive", action="store_true",
                        help="take entries from dlq_bridge:alerted:<dlq> (the default)")
    origin.add_argument("--from-dlq", action="store_true", help="take entries from the DLQ itself")
    origin.add_argument("--quarantine", action="store_true",
                        help="take entries from dlq_bridge:quarantine:<dlq> and push them back onto the DLQ itself")
    add("--dry-run", action="store_true", help="count and list what would move; change nothing")
    add("--limit", type=int, metavar="N", help="move at most N entries")
    add("--job-id", action="append", default=[], metavar="ID", help="only this job id (repeatable)")
    add("--note", default="", metavar="TEXT",
        help="why (kept with the cause's seen-before history; later alerts of the cause quote it)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(settings, args))
    except KeyboardInterrupt:
        print("redrive: interrupted (each entry moved is in its work queue; run it again for the rest)",
              file=sys.stderr)
        return EXIT_FAILED
    except redis.RedisError as exc:
        print(redis_error("redrive", settings, exc) + _explain(exc), file=sys.stderr)
        return EXIT_FAILED


def _explain(exc: redis.RedisError) -> str:
    if "CROSSSLOT" in str(exc):
        return " (on Redis Cluster the DLQ and the work queue need a common {hash tag})"
    return ""


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        print("redrive: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if (ref := kind_sources.find(settings, args.queue)) is not None:
        print(f"redrive: {ref.name} is a {ref.kind} source; the bridge does not retry its jobs: "
              f"{ref.own_ui}.", file=sys.stderr)
        return EXIT_USAGE
    plan = make_plan(args, settings.sources.match)
    if isinstance(plan, str):
        print(f"redrive: {plan}", file=sys.stderr)
        return EXIT_USAGE
    async with open_redis(settings) as client:
        problem = await wrong_types(client, plan)
        if problem:
            print(f"redrive: {problem}", file=sys.stderr)
            return EXIT_FAILED
        if not await client.exists(plan.dlq, archive_key(plan.dlq), quarantine_key(plan.dlq), plan.target):
            print(f"redrive: {await no_such_queue(client, plan, settings.sources.match)}", file=sys.stderr)
            return EXIT_NOT_FOUND
        operation = Redrive(client, settings.effective_sinks(), resolver=default_resolver())
        progress = progress_printer(plan, int(await client.llen(plan.source)))
        outcome = await operation.walk(plan, f"cli:{_login()}", _action(plan), progress, chunk=CHUNK,
                                       note=args.note)
        depths = await operation.depths(plan.dlq) if outcome.matched == 0 else None
        text = messages.line(outcome, depths)
        if not plan.dry_run:
            await operation.audit(f"cli:{_login()}", _action(plan), plan.dlq, outcome.moved > 0, text)
    code = EXIT_NOT_FOUND if outcome.missing_ids and not outcome.limit_reached() else EXIT_OK
    print(text, file=sys.stderr if code else sys.stdout)
    return code


def _action(plan: Plan) -> str:
    return "redrive-quarantine" if not plan.reset else "redrive"


async def no_such_queue(client: redis.Redis, plan: Plan, match: str) -> str:
    """What was not found, and the closest names of DLQs that exist or have an archive."""
    roles = [plan.dlq, "its archive", "its quarantine list"]
    if plan.target != plan.dlq:
        roles.append(f"the work queue {plan.target}")
    text = f"no such queue: none of {', '.join(roles[:-1])} or {roles[-1]} exists"
    return text + did_you_mean(await close_queues(client, plan.dlq, match))


def make_plan(args: argparse.Namespace, match: str) -> Plan | str:
    """The plan, or a usage problem as text."""
    dlq = resolve_source(args.queue, match)
    if getattr(args, "quarantine", False):
        return quarantine_plan(dlq, target=args.to, dry_run=args.dry_run, limit=args.limit,
                               job_ids=frozenset(args.job_id))
    source = dlq if getattr(args, "from_dlq", False) else archive_key(dlq)
    target = args.to or names.work_queue(dlq)
    if target is None:
        return f"cannot derive a work queue from {dlq} (no dead_letter: prefix): pass --to KEY"
    if target in (source, dlq):
        return f"the work queue {target} is the list entries come from"
    return Plan(source, target, dlq, args.dry_run, args.limit, frozenset(args.job_id))


async def wrong_types(client: redis.Redis, plan: Plan) -> str:
    for key in (plan.source, plan.target):
        kind = names.as_bytes(await client.type(key)).decode()
        if kind not in ("list", "none"):
            return f"{key} is a {kind}, not a list"
    return ""


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in a bare container
        return "unknown"


def progress_printer(plan: Plan, total: int) -> Callable[[Outcome], None]:
    """Progress on stderr at most once a second (long runs only)."""
    last = time.monotonic()

    def report(outcome: Outcome) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            verb = "matched" if plan.dry_run else "moved"
            count = outcome.matched if plan.dry_run else outcome.moved
            print(f"redrive: {count:,} {verb}, {outcome.scanned:,} of ~{total:,} scanned", file=sys.stderr, flush=True)

    return report
