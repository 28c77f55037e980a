"""`dlq-bridge summarize`: a dry run on one entry. Shows the summary and the
rendered body of every routed sink; sends nothing, claims nothing and, unless
`--cache` is given, writes no summary (the cache is only read; the call counts in the gateway budget).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from bridge.commands.common import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, resolve_source
from bridge.core import names
from bridge.core.models import Alert
from bridge.intake.chain import normalize
from bridge.runtime import Runtime, open_runtime, runbook_url_builder
from bridge.settings import Settings
from bridge.sinks.sink_registry import SINKS

MANUAL_SOURCE = "dead_letter:manual"
EPILOG = """examples:
  dlq-bridge summarize --file entry.json       # one raw entry from a file
  redis-cli LINDEX dead_letter:orders -1 | dlq-bridge summarize -
  dlq-bridge summarize --queue orders          # the next entry of dead_letter:orders (not claimed)
  dlq-bridge summarize --queue orders --json   # one JSON document

Runs the real summarizer (OpenClaw when [openclaw] is set, with its fallback)
and renders each routed sink's card. Nothing is sent or claimed. The summary
cache is read but not written, unless --cache is given (then a fresh OpenClaw
summary is stored as `run` would store it).

exit codes: 0 ok, 1 the file cannot be read, 2 bad configuration or usage,
4 no entry: stdin or the file is empty, the file or the queue does not exist
"""


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    where = parser.add_mutually_exclusive_group()
    where.add_argument("file", nargs="?", metavar="-", help="read the entry from stdin")
    where.add_argument("--file", dest="path", help="read the entry from PATH ('-' for stdin)")
    where.add_argument("--queue", help="the next entry of this DLQ (orders or dead_letter:orders)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--cache", action="store_true",
                        help="store a fresh OpenClaw summary in the summary cache (default: read only)")


Entry = tuple[bytes, str]  # raw bytes, source key


def run(settings: Settings, args: argparse.Namespace) -> int:
    given = None if args.queue else read_given(args, sys.stdin.buffer)
    if isinstance(given, NotFound):
        print(f"summarize: {given}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if isinstance(given, str):
        print(f"summarize: {given}", file=sys.stderr)
        return EXIT_FAILED
    return asyncio.run(run_async(settings, args, sys.stdout, given))


class NotFound(str):
    """Why there is no entry to summarize (exit 4), as opposed to a read failure."""


def read_given(args: argparse.Namespace, stdin: BinaryIO) -> Entry | str:
    """The entry from `--file PATH` or stdin, or why it cannot be read."""
    path = args.path or args.file or "-"
    if path == "-":
        if stdin.isatty():
            print("summarize: reading one entry from stdin (end with Ctrl-D)", file=sys.stderr)
        raw = stdin.read()
        return (raw, MANUAL_SOURCE) if raw.strip() else NotFound("no entry: stdin is empty")
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return NotFound(f"no entry: {path} does not exist")
    except OSError as exc:
        return f"cannot read {path} ({exc.strerror})"
    return (raw, MANUAL_SOURCE) if raw.strip() else NotFound(f"no entry: {path} is empty")


async def run_async(
    settings: Settings, args: argparse.Namespace, out: TextIO, given: Entry | None = None
) -> int:
    """The command body: `given` entry, else the next one of `--queue`; prints to `out`."""
    cache_writes = bool(getattr(args, "cache", False))
    # a one-off look: only --cache writes (the cache), never the fleet's tokens per day
    async with open_runtime(settings, stdout=io.StringIO(), cache_writes=cache_writes, daily_tokens=False) as runtime:
        found = given or await read_queue(runtime, args.queue)
        if isinstance(found, str):
            print(f"summarize: {found}", file=sys.stderr)
            return EXIT_NOT_FOUND
        raw, source_key = found
        dead_letter = normalize(raw, source_key, excerpt_max=settings.sources.excerpt_max_bytes)
        summary = await runtime.summarizer.summarize(dead_letter)
        url = runbook_url_builder(settings, runtime.runbooks)(summary.runbook_hint)
        severity = settings.severity.route(dead_letter.queue, summary.severity)
        trace = dead_letter.trace
        trace_url = settings.tracing.trace_link(trace.trace_id) if trace is not None else None
        alert = Alert(dead_letter=dead_letter, summary=summary, severity=severity, runbook_url=url, trace_url=trace_url)
        report(alert, render_sinks(runtime, alert), out, as_json=args.json)
    return EXIT_OK


async def read_queue(runtime: Runtime, queue: str) -> Entry | str:
    """The next entry of `queue` (the right end, claimed next), left in place."""
    source = resolve_source(queue, runtime.settings.sources.match)
    raw = await runtime.redis.lindex(source, -1)
    return (names.as_bytes(raw), source) if raw is not None else f"no entry: {source} is empty or does not exist"


def render_sinks(runtime: Runtime, alert: Alert) -> list[dict[str, Any]]:
    return [
        {"sink": route.sink.name, "type": route.settings.type, "body": route.sink.render(alert)}
        for route in runtime.dispatcher.routed(alert)
    ]


def report(alert: Alert, sinks: list[dict[str, Any]], out: TextIO, *, as_json: bool) -> None:
    summary = alert.summary.model_dump(mode="json")
    dl = alert.dead_letter
    entry = {"source_key": dl.source_key, "job_id": dl.job_id, "fingerprint": dl.fingerprint}
    if as_json:
        doc = {"entry": entry, "summary": summary, "runbook_url": alert.runbook_url, "sinks": sinks}
        print(json.dumps(doc, indent=2, ensure_ascii=False), file=out)
        return
    print(f"entry    {dl.source_key}  job {dl.job_id}  fingerprint {dl.fingerprint}", file=out)
    print("summary  " + json.dumps(summary, indent=2, ensure_ascii=False), file=out)
    if not sinks:
        print("\nno sink routes this alert (severity or queue filters)", file=out)
    for sink in sinks:
        print(f"\n── {sink['sink']} ({sink['type']}): would send, not sent ──", file=out)
        body = sink["body"]
        text = SINKS.named(sink["type"]).as_text(body) or json.dumps(body, indent=2, ensure_ascii=False)
        print(text, file=out)
