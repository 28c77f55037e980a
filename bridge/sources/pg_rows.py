"""What the PostgreSQL kinds share: scores from timestamps, bounded text and JSON, identifiers.

A score is a failure time in whole microseconds since the epoch (exact in a Redis double up to the
year 2255), computed by PostgreSQL itself (`SCORE_OF`) so the walker's keyset and the cursor agree to the
microsecond.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from bridge.sources.mapping import split_error

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TEXT_CHARS = 16 * 1024  # payloads and errors: longer text is cut by PostgreSQL before it is sent
IDENTIFIER_RE = r"^[a-z_][a-z0-9_]{0,62}$"
_IDENTIFIER = re.compile(IDENTIFIER_RE)


def score_of(column: str) -> str:
    """SQL: the bigint microseconds of a timestamp column (timestamp without time zone: read as UTC)."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def time_of(score: int) -> datetime:
    """The UTC time of a score, exactly."""
    return EPOCH + timedelta(microseconds=score)


def iso_of(score: Any) -> str | None:
    try:
        return time_of(int(score)).isoformat() if score else None
    except (TypeError, ValueError, OverflowError):
        return None


def quoted(identifier: str) -> str:
    """A schema or table name for SQL, after the settings' pattern checked it (never user text in SQL)."""
    if not _IDENTIFIER.match(identifier):
        raise ValueError("not a plain PostgreSQL identifier")
    return f'"{identifier}"'


def bounded(column: str) -> str:
    """SQL: a text or JSON column as text cut at MAX_TEXT_CHARS."""
    return f"left({column}::text, {MAX_TEXT_CHARS})"


def json_or_text(value: str | None) -> Any:
    """JSON text as its value; text that is not JSON (or was cut) as the text itself."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def first_line_error(text: str | None) -> tuple[str | None, str | None]:
    """`Class: message` from the first line of an error text (a Ruby or Python error, a JS stack)."""
    return split_error(text.strip()) if text and text.strip() else (None, None)
