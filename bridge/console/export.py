"""Export the entries a search finds, as CSV or JSON, streamed (docs/design.md, "Console search").

`GET /api/v1/export?format=csv|json&rows=N&<search filter>`: the same filter
as `/api/v1/search`, newest first, at most `rows` entries (≤ ROWS_MAX), read
page by page while the response streams. The text is the redacted text every
page shows. A CSV cell that a spreadsheet would run as a formula (one that
starts with `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with
`'`, so it stays text. Every export is appended to the audit list with the
caller, the filter and the number of rows sent.
"""

from __future__ import annotations

import csv
import io
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

from pydantic import Field

from bridge.console.render import when
from bridge.console.search import SearchFilter, SearchPage
from bridge.console.views import EntryView

ROWS_MAX = 10_000
PAGE = 100
EMPTY_PAGES_MAX = 10  # pages that hit the scan bound with no match in a row: the export ends there
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
COLUMNS = ["archived_at", "source", "queue", "job_id", "job_name", "attempts", "last_error", "payload_excerpt",
           "fingerprint", "title", "severity", "summary_source", "deliveries"]

class ExportFilter(SearchFilter):
    format: Literal["csv", "json"] = "csv"
    rows: int = Field(default=1000, ge=1, le=ROWS_MAX, description="At most this many entries.")


Search = Callable[[SearchFilter], Awaitable[SearchPage]]
Done = Callable[[int], Awaitable[None]]


def inert(value: object) -> str:
    """The cell as text a spreadsheet will not evaluate."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def row_of(entry: EntryView) -> list[str]:
    env, summary = entry.envelope, entry.summary
    deliveries = "; ".join(f"{d.sink}: {d.state}" for d in entry.deliveries)
    cells = [when(entry.archived_at), entry.source, env.queue, env.job_id, env.job_name, env.attempts,
             env.last_error, env.payload_excerpt, env.fingerprint, summary.title if summary else "",
             entry.severity.value if entry.severity else "", summary.source.value if summary else "", deliveries]
    return [inert(c) for c in cells]


def describe(query: SearchFilter) -> str:
    """The filter as the audit list shows it (its URL query)."""
    given = {k: v for k, v in query.model_dump(exclude={"limit", "before"}).items() if v not in ("", None)}
    return urllib.parse.urlencode(given) or "everything"


async def entries(search: Search, query: SearchFilter, rows: int) -> AsyncIterator[EntryView]:
    """Up to `rows` matching entries, newest first, one search page at a time."""
    sent, cursor, empty = 0, query.before, 0
    while sent < rows and empty < EMPTY_PAGES_MAX:
        page = await search(query.model_copy(update={"limit": min(PAGE, rows - sent), "before": cursor}))
        for entry in page.entries:
            yield entry
        sent += len(page.entries)
        empty = 0 if page.entries else empty + 1
        if page.next_before is None:
            return
        cursor = page.next_before


async def csv_stream(search: Search, query: SearchFilter, rows: int, done: Done) -> AsyncIterator[bytes]:
    count = 0
    try:
        yield _csv_line(COLUMNS)
        async for entry in entries(search, query, rows):
            count += 1
            yield _csv_line(row_of(entry))
    finally:
        await done(count)


async def json_stream(search: Search, query: SearchFilter, rows: int, done: Done) -> AsyncIterator[bytes]:
    count = 0
    try:
        yield b"["
        async for entry in entries(search, query, rows):
            yield (b",\n" if count else b"\n") + entry.model_dump_json().encode()
            count += 1
        yield b"\n]\n"
    finally:
        await done(count)


def _csv_line(cells: list[str]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue().encode()
