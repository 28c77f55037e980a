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
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis.asyncio as redis

from bridge import keys
from bridge.commands import kind_sources
from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    as_bytes,
    open_redis,
    plural,
    resolve_source,
)
from bridge.console.audit import AuditLog
from bridge.envelope import identified, normalize
from bridge.identity import head_identity
from bridge.redis_client import as_cluster
from bridge.settings import Settings
from bridge.sources.base import entry_digest

# KEYS[1] source list, KEYS[2] work queue; ARGV[1] the exact entry, ARGV[2] the bytes to push.
REDRIVE_LUA = """
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1
"""
CHUNK = 500
PROGRESS_EVERY_S = 1.0
ATTEMPT_FIELDS = ("attempts", "attemptsMade", "retry_count")

EPILOG = """examples:
  dlq-bridge redrive orders --dry-run          # what would move from dead_letter:orders
  dlq-bridge redrive orders                    # all of dead_letter:orders -> orders
  dlq-bridge redrive orders --from-archive --limit 100
  dlq-bridge redrive orders --job-id job-42 --job-id job-43
  dlq-bridge redrive dead_letter:{carts}:eu --to {carts}:eu:jobs
  dlq-bridge redrive orders --quarantine      # quarantined entries back onto dead_letter:orders

Oldest entries move first. Each entry is LPUSHed onto the work queue (the DLQ
key without `dead_letter:` unless --to is given) with its attempt counter
reset to 0 (JSON objects; other bytes move unchanged). One atomic Lua script
per entry: a kill at any moment loses and duplicates nothing. On Redis Cluster,
a work queue in another slot than its DLQ is reached through a staging list
(dlq_bridge:redrive:<ref>): a kill there may push an entry twice, never lose it.

exit codes: 0 done (also when the DLQ is empty now), 1 Redis error or
interrupted, 2 bad configuration or usage, 4 not found: neither the DLQ, its
archive nor its work queue exists, or a given --job-id matched no entry (named
on stderr)
"""


@dataclass(frozen=True)
class Plan:
    source: str  # the list entries leave (DLQ or archive)
    target: str  # the work queue they join
    dlq: str  # the DLQ key, for normalizing entries
    dry_run: bool = False
    limit: int | None = None
    job_ids: frozenset[str] = frozenset()
    quarantined: bool = False  # from the quarantine list: moved byte for byte, never parsed


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
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-archive", action="store_true", help="take entries from dlq_bridge:alerted:<dlq>")
    source.add_argument("--quarantine", action="store_true",
                        help="push quarantined entries (dlq_bridge:quarantine:<dlq>) back onto the DLQ itself, "
                        "byte for byte, to be alerted on normally (recorded in the audit list)")
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
        if not await client.exists(plan.dlq, keys.alerted(plan.dlq), plan.source, plan.target):
            print(f"redrive: {await no_such_queue(client, plan, settings.sources.match)}", file=sys.stderr)
            return EXIT_NOT_FOUND
        if finished := await finish_staged(client, plan):
            print(f"redrive: pushed {plural(finished, 'entry', 'entries')} an interrupted redrive left "
                  f"in {keys.redrive_staging(plan.dlq)} onto {plan.target}", file=sys.stderr)
        total = int(await client.llen(plan.source))
        await redrive(client, plan, outcome, progress_printer(plan, total))
        if plan.quarantined and not plan.dry_run:
            await AuditLog(client).append(f"cli:{getpass.getuser()}", "redrive-quarantine", keys.display(plan.dlq),
                                          "done", f"{plural(outcome.moved, 'entry', 'entries')} pushed back")
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
    names = []
    async for key in client.scan_iter(match=match, count=1000, _type="list"):
        names.append(as_bytes(key).decode("utf-8", errors="replace"))
        if len(names) >= 10_000:
            break
    close = difflib.get_close_matches(plan.dlq, names, n=3)
    return text + (f" (did you mean {', '.join(close)}?)" if close else "")


def make_plan(args: argparse.Namespace, match: str) -> Plan | str:
    """The plan, or a usage problem as text."""
    dlq = resolve_source(args.queue, match)
    if getattr(args, "quarantine", False):
        return Plan(keys.quarantine(dlq), args.to or dlq, dlq, args.dry_run, args.limit, frozenset(args.job_id),
                    quarantined=True)
    source = keys.alerted(dlq) if args.from_archive else dlq
    target = args.to or keys.work_queue(dlq)
    if target is None:
        return f"cannot derive a work queue from {dlq} (no dead_letter: prefix): pass --to KEY"
    if target in (source, dlq):
        return f"the work queue {target} is the list entries come from"
    return Plan(source, target, dlq, args.dry_run, args.limit, frozenset(args.job_id))


async def wrong_types(client: redis.Redis, plan: Plan) -> str:
    for key in (plan.source, plan.target):
        kind = as_bytes(await client.type(key)).decode()
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
        batch = _select(plan, outcome, [as_bytes(r) for r in reversed(raws)])
        skipped += outcome.scanned - scanned_before - len(batch)
        if batch:
            moved = await _move(client, plan, batch)
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
            found = _job_id(plan, raw)
            if found not in plan.job_ids:
                continue
            outcome.found_ids.add(found)
        outcome.matched += 1
        if plan.dry_run:
            if len(outcome.samples) < 10:
                outcome.samples.append(_job_id(plan, raw))
        else:
            batch.append(raw)
    return batch


def job_id(raw: bytes, dlq: str) -> str:
    return normalize(raw, dlq, excerpt_max=64).job_id


def _job_id(plan: Plan, raw: bytes) -> str:
    """A quarantined entry is never parsed (it may be what killed the bridge): a bounded read of its head."""
    if plan.quarantined:
        return identified(head_identity(raw), plan.dlq, entry_digest(raw)).job_id
    return job_id(raw, plan.dlq)


def _pushed(plan: Plan, raw: bytes) -> bytes:
    return raw if plan.quarantined else reset_attempts(raw)


async def _move(client: redis.Redis, plan: Plan, batch: list[bytes]) -> int:
    """Pipelined, but each entry is its own script: atomic one by one."""
    if not same_slot(client, plan):
        return await _move_across_slots(client, plan, batch)
    async with client.pipeline(transaction=False) as pipe:
        for raw in batch:
            pipe.eval(REDRIVE_LUA, 2, plan.source, plan.target, raw, _pushed(plan, raw))
        results = await pipe.execute()
    return sum(int(r) for r in results)


def same_slot(client: redis.Redis, plan: Plan) -> bool:
    """One server, or a cluster where the DLQ and the work queue share a slot."""
    if as_cluster(client) is None:
        return True
    return keys.key_slot(keys.encode(plan.source)) == keys.key_slot(keys.encode(plan.target))


async def _move_across_slots(client: redis.Redis, plan: Plan, batch: list[bytes]) -> int:
    """On a cluster, through `dlq_bridge:redrive:<ref>` in the DLQ's slot (no script may span two slots).

    Per entry: one script moves it from the source to the staging list (atomic, same slot),
    then it is pushed onto the work queue, then dropped from the staging list. A kill in
    between leaves it in the staging list, which the next redrive of this DLQ empties first:
    never lost; at worst pushed twice.
    """
    staging = keys.redrive_staging(plan.dlq)
    async with client.pipeline(transaction=False) as pipe:
        for raw in batch:
            pipe.eval(REDRIVE_LUA, 2, plan.source, staging, raw, _pushed(plan, raw))
        staged = [_pushed(plan, raw) for raw, r in zip(batch, await pipe.execute(), strict=True) if int(r)]
    await _unstage(client, plan.target, staging, staged)
    return len(staged)


async def _unstage(client: redis.Redis, target: str, staging: str, entries: list[bytes]) -> None:
    if not entries:
        return
    await client.lpush(target, *entries)
    async with client.pipeline(transaction=False) as pipe:
        for raw in entries:
            pipe.lrem(staging, 1, raw)  # type: ignore[arg-type]  # redis-py takes bytes values
        await pipe.execute()


async def finish_staged(client: redis.Redis, plan: Plan) -> int:
    """Push what a killed cross-slot redrive of this DLQ left in its staging list (oldest first)."""
    if same_slot(client, plan) or plan.dry_run:
        return 0
    staging = keys.redrive_staging(plan.dlq)
    left = [as_bytes(r) for r in reversed(await client.lrange(staging, 0, -1))]
    await _unstage(client, plan.target, staging, left)
    return len(left)


def reset_attempts(raw: bytes) -> bytes:
    """The entry with `attempts` (and other known counters) set to 0; non-objects unchanged."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(obj, dict):
        return raw
    obj["attempts"] = 0
    for name in ATTEMPT_FIELDS[1:]:
        if name in obj:
            obj[name] = 0
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


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
    how = "byte for byte" if plan.quarantined else "attempts reset"
    return (f"redrive: moved {plural(outcome.moved, 'entry', 'entries')} "
            f"from {plan.source} to {plan.target}, "
            f"{how}{gone}")


async def move_batch(client: redis.Redis, plan: Plan, batch: list[bytes]) -> int:
    """Move these exact entries from `plan.source` to `plan.target` (attempts reset); how many moved.

    The console's redrive goes through here, so it moves entries exactly as this command does.
    """
    return await _move(client, plan, batch)
