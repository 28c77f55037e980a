"""`dlq-bridge redrive QUEUE`: move dead (or archived) entries back to their work queue.

One Lua script per entry removes exactly that entry from the source list and
pushes it (attempts reset) onto the work queue, so a crash or `kill -9` at any
instant leaves every entry in exactly one of the two lists. On Redis Cluster,
when the work queue lives in another slot than its DLQ (no common `{hash tag}`),
no script may touch both: each entry then moves through a staging list in the
DLQ's slot (`dlq_bridge:redrive:<ref>`, emptied first by the next redrive of
that DLQ after a kill), so it is never lost, at worst pushed twice.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import getpass
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis.asyncio as redis

from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    open_redis,
    plural,
    resolve_source,
)
from bridge.core import names
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.sources import refs as kind_sources
from bridge.stores.archive import archive_key
from bridge.stores.audit import AuditLog
from bridge.stores.requeue import Plan, finish_staged, move_batch, quarantine_plan, staging_key

CHUNK = 500
PROGRESS_EVERY_S = 1.0

EPILOG = """examples:
  dlq-bridge redrive orders --dry-run          # what would move from dead_letter:orders
  dlq-bridge redrive orders                    # all of dead_letter:orders -> orders
  dlq-bridge redrive orders --from-archive --limit 100
  dlq-bridge redrive orders --job-id job-42 --job-id job-43
  dlq-bridge redrive dead_letter:{carts}:eu --to {carts}:eu:jobs
  dlq-bridge redrive orders --quarantine --dry-run   # what is quarantined for dead_letter:orders
  dlq-bridge redrive orders --quarantine       # dlq_bridge:quarantine:… -> dead_letter:orders

Oldest entries move first. Each entry is LPUSHed onto the work queue (the DLQ
key without `dead_letter:` unless --to is given) with its attempt counter
reset to 0 (JSON objects; other bytes move unchanged). One atomic Lua script
per entry: a kill at any moment loses and duplicates nothing. On Redis Cluster,
a work queue in another slot than its DLQ is reached through a staging list
(dlq_bridge:redrive:<ref>): a kill there may push an entry twice, never lose it.

--quarantine takes the entries the bridge quarantined (dlq_bridge:quarantine:<ref>,
kept byte for byte) and pushes them back, unchanged, onto their DLQ, so the bridge
claims and alerts on them again as new entries: fix what killed the bridge first.
Each move is the same atomic script (the quarantine list shares the DLQ's slot),
and the run is recorded in the console's audit list (dlq_bridge:audit).

exit codes: 0 done (also when the DLQ is empty now), 1 Redis error or
interrupted, 2 bad configuration or usage, 4 not found: neither the DLQ, its
archive nor its work queue exists, or a given --job-id matched no entry (named
on stderr)
"""


@dataclass
class Outcome:
    scanned: int = 0
    matched: int = 0
    moved: int = 0
    vanished: int = 0  # matched, but gone before the move (claimed by the bridge meanwhile)
    samples: list[str] = field(default_factory=list)
    found_ids: set[str] = field(default_factory=set)  # the given --job-id values seen


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    add = parser.add_argument
    add("queue", help="queue name (orders) or DLQ key (dead_letter:orders)")
    add("--to", metavar="KEY", help="work queue key (default: the DLQ key without dead_letter:)")
    add("--from-archive", action="store_true", help="take entries from dlq_bridge:alerted:<dlq>")
    add("--quarantine", action="store_true",
        help="take entries from dlq_bridge:quarantine:<dlq> and push them back onto the DLQ itself")
    add("--dry-run", action="store_true", help="count and list what would move; change nothing")
    add("--limit", type=int, metavar="N", help="move at most N entries")
    add("--job-id", action="append", default=[], metavar="ID", help="only this job id (repeatable)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    outcome = Outcome()
    try:
        return asyncio.run(_run(settings, args, outcome))
    except KeyboardInterrupt:
        print(f"redrive: interrupted after moving {outcome.moved} entries", file=sys.stderr)
        return EXIT_FAILED
    except redis.RedisError as exc:
        print(f"redrive: Redis error after moving {outcome.moved} entries: {_explain(exc)}")
        return EXIT_FAILED


def _explain(exc: redis.RedisError) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "CROSSSLOT" in text:
        text += " (on Redis Cluster the DLQ and the work queue need a common {hash tag})"
    return text


async def _run(settings: Settings, args: argparse.Namespace, outcome: Outcome) -> int:
    if args.limit is not None and args.limit < 1:
        print("redrive: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if (ref := kind_sources.find(settings, args.queue)) is not None:
        print(f"redrive: {ref.name} is a {ref.kind} source; the bridge does not retry its jobs: "
              f"{ref.own_ui}.", file=sys.stderr)
        return EXIT_USAGE
    async with open_redis(settings) as client:
        plan = make_plan(args, settings.sources.match)
        if isinstance(plan, str):
            print(f"redrive: {plan}", file=sys.stderr)
            return EXIT_USAGE
        problem = await wrong_types(client, plan)
        if problem:
            print(f"redrive: {problem}", file=sys.stderr)
            return EXIT_FAILED
        if not await client.exists(plan.dlq, archive_key(plan.dlq), plan.target, plan.source):
            print(f"redrive: {await no_such_queue(client, plan, settings.sources.match)}", file=sys.stderr)
            return EXIT_NOT_FOUND
        if finished := await finish_staged(client, plan):
            print(f"redrive: pushed {plural(finished, 'entry', 'entries')} an interrupted redrive left "
                  f"in {staging_key(plan.dlq)} onto {plan.target}", file=sys.stderr)
        total = int(await client.llen(plan.source))
        await redrive(client, plan, outcome, progress_printer(plan, total))
        if args.quarantine and not plan.dry_run:
            await audit_quarantine_redrive(client, plan, outcome)
    print(summary_line(plan, outcome))
    missing = sorted(plan.job_ids - outcome.found_ids)
    if missing and not _limit_reached(plan, outcome):
        print(f"redrive: no entry of {plan.source} has job id {', '.join(missing)} "
              f"({plural(outcome.scanned, 'entry', 'entries')} scanned)", file=sys.stderr)
        return EXIT_NOT_FOUND
    return EXIT_OK


async def no_such_queue(client: redis.Redis, plan: Plan, match: str) -> str:
    """What was not found, and the closest DLQ names that exist."""
    text = f"no such queue: {plan.dlq} does not exist, nor its archive or the work queue {plan.target}"
    found = []
    async for key in client.scan_iter(match=match, count=1000, _type="list"):
        found.append(names.as_bytes(key).decode("utf-8", errors="replace"))
        if len(found) >= 10_000:
            break
    close = difflib.get_close_matches(plan.dlq, found, n=3)
    return text + (f" (did you mean {', '.join(close)}?)" if close else "")


def make_plan(args: argparse.Namespace, match: str) -> Plan | str:
    """The plan, or a usage problem as text."""
    dlq = resolve_source(args.queue, match)
    if getattr(args, "quarantine", False):
        if args.from_archive:
            return "--quarantine and --from-archive name two different source lists: pick one"
        return quarantine_plan(dlq, target=args.to, dry_run=args.dry_run, limit=args.limit,
                               job_ids=frozenset(args.job_id))
    source = archive_key(dlq) if args.from_archive else dlq
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


async def redrive(
    client: redis.Redis,
    plan: Plan,
    outcome: Outcome,
    progress: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Walk the source list oldest first, moving matching entries one atomic script each."""
    skipped = 0  # entries left in place at the right end (not matching, or dry run)
    while not _limit_reached(plan, outcome):
        raws = await client.lrange(plan.source, -(skipped + CHUNK), -(skipped + 1))
        if not raws:
            break
        scanned_before = outcome.scanned
        batch = _select(plan, outcome, [names.as_bytes(r) for r in reversed(raws)])
        skipped += outcome.scanned - scanned_before - len(batch)
        if batch:
            moved = await move_batch(client, plan, batch)
            outcome.moved += moved
            outcome.vanished += len(batch) - moved
        if progress is not None:
            progress(outcome)
    return outcome


def _limit_reached(plan: Plan, outcome: Outcome) -> bool:
    return plan.limit is not None and outcome.matched >= plan.limit


def _select(plan: Plan, outcome: Outcome, raws: list[bytes]) -> list[bytes]:
    """The entries of this chunk to move; counts scanned and matched ones."""
    batch = []
    for raw in raws:
        if _limit_reached(plan, outcome):
            break
        outcome.scanned += 1
        if plan.job_ids:
            found = job_id(raw, plan.dlq)
            if found not in plan.job_ids:
                continue
            outcome.found_ids.add(found)
        outcome.matched += 1
        if plan.dry_run:
            if len(outcome.samples) < 10:
                outcome.samples.append(job_id(raw, plan.dlq))
        else:
            batch.append(raw)
    return batch


async def audit_quarantine_redrive(client: redis.Redis, plan: Plan, outcome: Outcome) -> None:
    """One audit record per run, as the console's actions write them (who: `cli:<login>`)."""
    detail = f"{plural(outcome.moved, 'entry', 'entries')} moved from {plan.source} to {plan.target}"
    await AuditLog(client).append(f"cli:{_login()}", "redrive-quarantine", plan.dlq, "ok", detail)


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in a bare container
        return "unknown"


def job_id(raw: bytes, dlq: str) -> str:
    return normalize(raw, dlq, excerpt_max=64).job_id


def progress_printer(plan: Plan, total: int) -> Callable[[Outcome], None]:
    """Progress on stderr at most once a second (long runs only)."""
    last = time.monotonic()

    def report(outcome: Outcome) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            verb = "matched" if plan.dry_run else "moved"
            count = outcome.matched if plan.dry_run else outcome.moved
            print(f"redrive: {count:,} {verb}, {outcome.scanned:,} of ~{total:,} scanned",
                  file=sys.stderr, flush=True)

    return report


def summary_line(plan: Plan, outcome: Outcome) -> str:
    if plan.dry_run:
        shown = f"; job ids: {', '.join(outcome.samples)}" if outcome.samples else ""
        more = " …" if outcome.matched > len(outcome.samples) else ""
        return (f"redrive (dry run): would move {outcome.matched} of {outcome.scanned} scanned "
                f"entries from {plan.source} to {plan.target}{shown}{more}; nothing changed")
    gone = f" ({outcome.vanished} claimed by the bridge meanwhile)" if outcome.vanished else ""
    return (f"redrive: moved {plural(outcome.moved, 'entry', 'entries')} "
            f"from {plan.source} to {plan.target}, "
            f"{'attempts reset' if plan.reset else 'bytes unchanged'}{gone}")
