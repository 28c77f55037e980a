"""A few top-level scalar fields of a JSON object, read with a streaming parser in bounded memory.

Used where the whole entry must not be parsed (docs/design.md, section 1, "Identity of an
oversized or quarantined entry"): an entry over `sources.max_parse_bytes` and the first bytes of a
quarantined one. The bytes are fed to ijson (its yajl2 C backend; the pure-Python one when the
C one is missing, said once in the log) in chunks of 64 KB doubling up to 4 MB (yajl rescans a
token still open at each chunk, so fixed small chunks make one 20 MB string quadratic), and only
events at the top level of the object are looked at: nested values are skipped as they stream
by, never built. Reading stops as soon as every wanted group of names has one value, and a value
of a `capped` name (the error text) that runs past `cap_bytes` is cut from the raw bytes instead
of waiting for its end.
Malformed JSON after the fields, a cut-off head, a top level that is not an object: the fields
read so far are kept. Never raises.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

log = logging.getLogger(__name__)

FIRST_CHUNK_BYTES = 64 * 1024
MAX_CHUNK_BYTES = 4 * 1024 * 1024  # chunks double up to this: yajl rescans an open token per chunk
Scalar = str | int | float | bool | None
_LENIENT = json.JSONDecoder(strict=False)  # control characters in a cut string are kept, then cleaned


class _NotAnObject(Exception):
    """The top-level value is not a JSON object: nothing to read."""


@functools.cache
def backend() -> Any:
    """ijson's yajl2 C backend, else its pure-Python one (logged once). ijson is imported here, by the
    first oversized entry, not at start-up."""
    import ijson

    try:
        return ijson.get_backend("yajl2_c")
    except (ImportError, ValueError) as exc:
        log.warning("ijson's C backend (yajl2_c) is missing (%s); oversized entries are read with the "
                    "slower pure-Python backend", type(exc).__name__)
        return ijson.get_backend("python")


class _TopLevel:
    """Collects the wanted scalars at depth 1 of the object from ijson's basic events."""

    def __init__(self, groups: Sequence[Sequence[str]], extra: Iterable[str], capped: Iterable[str]) -> None:
        self.groups = [frozenset(group) for group in groups]
        self.wanted = frozenset().union(*self.groups, extra)
        self.capped = frozenset(capped)
        self.found: dict[str, Scalar] = {}
        self.depth = 0
        self.key: str | None = None  # the wanted key whose value comes next
        self.key_chunk = 0  # offset of the chunk in which that key was read

    def on(self, event: str, value: Any, chunk_at: int) -> None:
        if event in ("start_map", "start_array"):
            if self.depth == 0 and event != "start_map":
                raise _NotAnObject
            self.key = None if self.depth == 1 else self.key  # a structure: not a scalar, not read
            self.depth += 1
        elif event in ("end_map", "end_array"):
            self.depth -= 1
        elif self.depth == 0:
            raise _NotAnObject
        elif self.depth == 1 and event == "map_key":
            self.key = value if value in self.wanted and value not in self.found else None
            self.key_chunk = chunk_at
        elif self.depth == 1 and self.key is not None:
            self.found[self.key] = value
            self.key = None

    def complete(self) -> bool:
        return all(not group.isdisjoint(self.found) for group in self.groups)

    def cut_long_value(self, raw: bytes, fed_to: int, cap_bytes: int) -> None:
        """A capped field whose value is still open `cap_bytes` after its key: its head, from the bytes."""
        key = self.key
        if key is None or key not in self.capped or fed_to - self.key_chunk <= cap_bytes:
            return
        start = max(0, self.key_chunk - len(key) * 6 - 2)  # the key may begin in an earlier chunk
        pattern = re.compile(b'"' + re.escape(key.encode()) + rb'"\s*:\s*"')
        match = pattern.search(raw, start, fed_to)
        self.found[key] = _string_head(raw[match.end(): match.end() + cap_bytes]) if match else None
        self.key = None  # its value, when it ends, is not taken again


def _string_head(data: bytes) -> str:
    """The text of the first bytes of a JSON string (no closing quote), a cut escape dropped."""
    text = data.decode("utf-8", errors="ignore")
    for cut in range(7):  # a cut `\uXXXX` is at most 6 characters
        try:
            head: str = _LENIENT.decode(f'"{text[: len(text) - cut]}"')
            return head
        except ValueError:
            continue
    return text


def read_top_fields(
    raw: bytes,
    groups: Sequence[Sequence[str]],
    *,
    extra: Iterable[str] = (),
    capped: Iterable[str] = (),
    cap_bytes: int = 32 * 1024,
) -> dict[str, Scalar]:
    """The top-level scalars of `raw` named in `groups` or `extra` (first occurrence of each).

    Stops once every group has a value (`extra` names are taken when met, never waited for).
    """
    import ijson

    reader = _TopLevel(groups, extra, capped)
    events = ijson.sendable_list()
    parser = backend().basic_parse_coro(events, use_float=True)
    at, size = 0, FIRST_CHUNK_BYTES
    try:
        while True:
            end = at + size
            fault = _feed(parser, raw[at:end], last=end >= len(raw))
            for event, value in events:  # the events before a fault count too
                reader.on(event, value, at)
            del events[:]
            reader.cut_long_value(raw, end, cap_bytes)
            if fault or end >= len(raw) or reader.complete():
                break
            at, size = end, min(size * 2, MAX_CHUNK_BYTES)
    except _NotAnObject:
        pass
    return {name: value for name, value in reader.found.items() if value is not None}


def _feed(parser: Any, chunk: bytes, *, last: bool) -> bool:
    """Send one chunk (and the end after the last); True when the JSON turned out malformed."""
    import ijson

    try:
        parser.send(chunk)
        if last:
            parser.close()
    except (ijson.JSONError, ValueError, UnicodeError, RecursionError, StopIteration):
        return True
    return False
