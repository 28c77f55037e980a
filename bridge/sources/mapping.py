"""Native dead jobs → the envelope-shaped object `bridge.intake.chain.normalize` reads.

Each kind fills a `Mapped` from its own field names; `to_raw` writes it as canonical JSON (sorted
keys, so every replica computes the same raw digest for the same job), and `dead_letter` runs
the one normalization shared with the lists (docs/design.md, section 3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bridge.core.models import DeadLetter
from bridge.intake.chain import normalize
from bridge.intake.envelope import MAX_FIELD_CHARS, clean_text
from bridge.sources.kinds import KindRecord

_ERROR_HEAD = re.compile(r"^([A-Za-z_][\w.$]*(?:::[A-Za-z_][\w.$]*)*)(?::\s)")


@dataclass(frozen=True)
class Mapped:
    queue: str
    job_id: str
    job_name: str | None = None
    attempts: int | None = None
    error_class: str | None = None
    error_message: str | None = None
    first_failed_at: str | None = None
    correlation_id: str | None = None
    payload: Any = None
    traceparent: str | None = None  # as the job system kept it; intake validates it (W3C)
    tracestate: str | None = None


def to_raw(mapped: Mapped) -> bytes:
    """Canonical envelope-shaped JSON of one mapped job."""
    obj: dict[str, Any] = {"queue": mapped.queue, "job_id": mapped.job_id}
    optional = {
        "job_name": mapped.job_name,
        "attempts": mapped.attempts,
        "last_error": last_error(mapped.error_class, mapped.error_message),
        "first_failed_at": mapped.first_failed_at,
        "correlation_id": mapped.correlation_id,
        "payload": mapped.payload,
        "traceparent": mapped.traceparent,
        "tracestate": mapped.tracestate,
    }
    obj.update({k: v for k, v in optional.items() if v is not None})
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()


def last_error(error_class: str | None, message: str | None) -> str | None:
    """`Class: message`, or whichever half exists."""
    if error_class and message:
        return f"{error_class}: {message}"
    return error_class or message or None


def split_error(text: str | None) -> tuple[str | None, str | None]:
    """`TypeError: boom` → ("TypeError", "boom"); text without a class head → (None, text)."""
    if not text:
        return None, None
    first = text.strip().splitlines()[0] if text.strip() else ""
    match = _ERROR_HEAD.match(first)
    if match is None:
        return None, first or None
    return match.group(1), first[match.end() :].strip() or None


def iso_from_epoch(value: Any) -> str | None:
    """Epoch seconds or milliseconds (number or numeric string) → ISO 8601 UTC; None otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if number != number or number <= 0:  # NaN or not a time
        return None
    seconds = number / 1000 if number > 1e11 else number
    try:
        return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, bytes | str):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return int(text) if text.strip().isdigit() and len(text) < 19 else None
    return None


def text(value: Any) -> str | None:
    """A str from Redis bytes (invalid UTF-8 replaced) or a str; None for anything else or empty."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) and value else None


def dead_letter(record: KindRecord, *, excerpt_max: int = 2048) -> DeadLetter:
    """The normalized, redacted envelope of one kind record; the route's queue is the record's."""
    letter = normalize(record.raw, record.source_key, excerpt_max=excerpt_max)
    queue = clean_text(record.queue, MAX_FIELD_CHARS)
    if letter.queue != queue:
        letter = letter.model_copy(update={"queue": queue})
    if letter.attempts is None and record.attempts is not None:
        letter = letter.model_copy(update={"attempts": record.attempts})
    return letter
