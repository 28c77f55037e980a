"""`dlq-bridge peek [QUEUE]`: DLQ depths, or the entries of one DLQ. Read-only.

Only SCAN (with TYPE list, never KEYS), LLEN and LRANGE are used, so peeking
at a busy production Redis is safe. Entries are shown through
`bridge.intake.chain.normalize`, so secrets in them are redacted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

import redis.asyncio as redis

from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    close_queues,
    did_you_mean,
    one_line,
    open_redis,
    plural,
    redis_error,
    render_table,
    resolve_source,
    terminal_width,
)
from bridge.core import names
from bridge.core.models import DeadLetter
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.sources import refs as kind_sources
from bridge.stores import undeliverable_records
from bridge.stores.archive import Archive, Record, archive_key, quarantine_key
from bridge.stores.claims import is_bridge_key, processing_depths
from bridge.stores.groups import Grouper
from bridge.stores.undeliverable_records import UndeliverableStore

EPILOG = """examples:
  dlq-bridge peek                          # every DLQ: waiting, processing, archived
  dlq-bridge peek orders                   # newest 20 entries of dead_letter:orders
  dlq-bridge peek orders --limit 50 --offset 50
  dlq-bridge peek orders --archive         # entries already alerted (dlq_bridge:alerted:…)
  dlq-bridge peek dead_letter:{carts}:eu --json | jq .job_id
  dlq-bridge peek --groups                 # open alert groups of every grouped sink, with sample jobs

Entries are listed newest first (index 0 is the left end, where producers
LPUSH); the bridge claims from the right end. Nothing is modified.

exit codes: 0 ok (also for a list that exists and is empty now), 1 Redis
unreachable or the key is not a list, 2 bad configuration or usage, 4 no such
queue: neither the DLQ, its archive nor its quarantine list exists (close names
suggested)
"""

HEADERS = ["#", "job id", "name", "attempts", "age", "error"]


@dataclass(frozen=True)
class Depths:
    source: str
    waiting: int
    processing: int
    archived: int


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    add = parser.add_argument
    add("queue", nargs="?", help="queue name (orders) or DLQ key (dead_letter:orders)")
    add("--limit", type=_positive, default=20, help="entries per page (default 20)")
    add("--offset", type=_not_negative, default=0, help="skip this many (default 0)")
    add("--archive", action="store_true", help="list the archive of alerted entries")
    add("--json", action="store_true", help="one normalized envelope per line")
    add("--groups", action="store_true", help="open alert groups of every grouped sink (docs/design.md, 5b)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(settings, args))
    except redis.RedisError as exc:
        print(redis_error("peek", settings, exc), file=sys.stderr)
        return EXIT_FAILED


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    if args.queue is not None and (ref := kind_sources.find(settings, args.queue)) is not None:
        print(f"peek: {ref.name} is a {ref.kind} source: browse it in the job system's own UI; "
              f"{ref.own_ui}. `dlq-bridge check` shows its depth.")
        return EXIT_OK
    async with open_redis(settings) as client:
        if args.groups:
            return await print_groups(client, settings, as_json=args.json)
        if args.queue is None:
            print_depths(await dlq_depths(client, settings.sources.match),
                         await UndeliverableStore(client).depth())
            print_kinds(settings)
            return EXIT_OK
        return await _list(client, settings, args)


async def print_groups(client: redis.Redis, settings: Settings, *, as_json: bool) -> int:
    """Every open group of every grouped sink: jobs in all, jobs notified, first/last seen, samples."""
    from bridge.console.fleet import group_summaries  # the titles, as the console shows them

    grouped = [sink for sink in settings.effective_sinks() if sink.group_by != "none"]
    if not grouped:
        print("no grouped sink configured: every sink sends one notification per job (group_by = \"none\")")
        return EXIT_OK
    views = []
    for sink in grouped:
        views.extend(await Grouper(client, sink).views())
    titles = {(g.sink, g.group_key): g.title for g in await group_summaries(client, settings.effective_sinks())}
    if as_json:
        for view in views:
            print(json.dumps({**dataclasses.asdict(view), "title": titles.get((view.sink, view.group_key), "")}))
        return EXIT_OK
    if not views:
        print("no open alert groups")
        return EXIT_OK
    rows = [[v.sink, one_line(titles.get((v.sink, v.group_key), "-"), 60), v.group_key, str(v.count),
             str(v.notified), _when(v.first_seen), _when(v.last_seen), one_line(", ".join(v.sample_keys), 60)]
            for v in views]
    print(render_table(["sink", "title", "group", "jobs", "notified", "first seen", "last seen", "sample jobs"],
                       rows))
    return EXIT_OK


def _when(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S") if epoch_s else "-"


def print_kinds(settings: Settings) -> None:
    """The configured kind sources: their dead jobs are browsed in the job system's own UI."""
    refs = kind_sources.configured(settings)
    if refs:
        print("\nother sources (their archive shows above; `dlq-bridge check` shows their depth):")
    for ref in refs:
        print(f"  {ref.name} ({ref.kind}): {ref.own_ui}")


async def dlq_depths(client: redis.Redis, match: str) -> list[Depths]:
    """Every source known from its DLQ, a processing list or an archive."""
    waiting = {k: int(await client.llen(k)) for k in await _scan(client, match) if not is_bridge_key(k)}
    processing = await processing_depths(client)
    archived = await Archive(client).depths()
    sources = sorted(set(waiting) | set(processing) | set(archived))
    return [Depths(s, waiting.get(s, 0), processing.get(s, 0), archived.get(s, 0)) for s in sources]


async def _scan(client: redis.Redis, match: str) -> list[str]:
    found = [key async for key in client.scan_iter(match=match, count=1000, _type="list")]
    return sorted({k.decode("utf-8", errors="replace") for k in found})


def print_depths(depths: list[Depths], undeliverable: int) -> None:
    if not depths:
        print("no DLQs found")
    else:
        rows = [[d.source, str(d.waiting), str(d.processing), str(d.archived)] for d in depths]
        print(render_table(["dlq", "waiting", "processing", "archived"], rows))
        print()
    print(f"{undeliverable_records.NAME}: {undeliverable}")


async def _list(client: redis.Redis, settings: Settings, args: argparse.Namespace) -> int:
    source = resolve_source(args.queue, settings.sources.match)
    key = archive_key(source) if args.archive else source
    kind = names.as_bytes(await client.type(key)).decode()
    if kind not in ("list", "none"):
        print(f"peek: {key} is a {kind}, not a list", file=sys.stderr)
        return EXIT_FAILED
    if not await client.exists(source, archive_key(source), quarantine_key(source)):
        close = await close_queues(client, source, settings.sources.match)
        print(f"peek: no such queue: none of {source}, its archive or its quarantine list exists"
              f"{did_you_mean(close)}", file=sys.stderr)
        return EXIT_NOT_FOUND
    total = int(await client.llen(key))
    raws = [names.as_bytes(raw) for raw in await client.lrange(key, args.offset, args.offset + args.limit - 1)]
    letters = [normalize(raw, source, excerpt_max=settings.sources.excerpt_max_bytes) for raw in raws]
    if args.json:
        for letter in letters:
            print(letter.model_dump_json())
        return EXIT_OK
    alerted = await alerted_at(client, source, letters) if args.archive else {}
    print_entries(key, letters, args.offset, total, alerted)
    if not letters and not args.archive and (archived := int(await client.llen(archive_key(source)))):
        print(f"{plural(archived, 'entry', 'entries')} alerted and archived: --archive lists them")
    return EXIT_OK


async def alerted_at(client: redis.Redis, source: str, letters: list[DeadLetter]) -> dict[str, float]:
    """digest → when each archived entry was handed off (its record), for the age column of `--archive`."""
    digests = [letter.raw_digest for letter in letters]
    records = [Record.parse(raw) for raw in await Archive(client).records(source, digests)] if digests else []
    return {d: r.ms / 1000 for d, r in zip(digests, records, strict=True) if r is not None}


def print_entries(
    key: str, letters: list[DeadLetter], offset: int, total: int, alerted: dict[str, float] | None = None
) -> None:
    """The table; `alerted` (digest → hand-off time) ages an archived entry whose producer gave no time."""
    if not letters:
        print(f"{key}: no entries" + (f" at offset {offset} (length {total})" if total else ""))
        return
    now = datetime.now(UTC)
    rows = [entry_row(offset + i, letter, now, 10_000, (alerted or {}).get(letter.raw_digest))
            for i, letter in enumerate(letters)]
    fixed = sum(max(len(h), *(len(r[c]) for r in rows)) + 2 for c, h in enumerate(HEADERS[:-1]))
    width = max(terminal_width() - fixed, 30)
    rows = [[*row[:-1], one_line(row[-1], width)] for row in rows]
    print(render_table(HEADERS, rows))
    last = offset + len(letters)
    print(f"\n{key}: showing {offset + 1}-{last} of {total}, newest first")
    if last < total:
        print(f"next page: --offset {last}")


def entry_row(index: int, letter: DeadLetter, now: datetime, width: int, alerted: float | None = None) -> list[str]:
    error = letter.last_error or (f"unparseable: {letter.parse_error}" if letter.parse_error
                                  else "(no error recorded)")
    return [
        str(index),
        one_line(letter.job_id, 40),
        one_line(letter.job_name or "-", 30),
        "-" if letter.attempts is None else str(letter.attempts),
        age(letter.first_failed_at or _iso(alerted), now),
        one_line(error, width),
    ]


def _iso(epoch_s: float | None) -> str | None:
    return None if epoch_s is None else datetime.fromtimestamp(epoch_s, tz=UTC).isoformat()


def age(first_failed_at: str | None, now: datetime) -> str:
    """`3m`, `5h`, `2d` since the first failure; `-` when unknown or unparseable."""
    if not first_failed_at:
        return "-"
    try:
        then = datetime.fromisoformat(first_failed_at.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max((now - then).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
