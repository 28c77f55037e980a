"""The whole job of an archived entry for its console page: every field, redacted as intake redacts, bounded.

The page's envelope shows a 2 KB excerpt; "Full job" expands the entry's own bytes: a JSON
object is decoded and redacted structurally (`bridge.intake.redact.redact_value`: sensitive
keys' values, token-shaped strings and card numbers become [REDACTED]), then pretty-printed;
anything else is redacted as text. Either is cut at FULL_MAX characters, and the backtrace
(the first of BACKTRACE_FIELDS the job has) is shown apart, redacted and cut the same way.
The raw bytes are never shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bridge.intake.redact import redact_text, redact_value

FULL_MAX = 64 * 1024
PARSE_MAX = 4 * 1024 * 1024  # larger entries are shown as (redacted) text: their head
BACKTRACE_FIELDS = ("backtrace", "error_backtrace", "stacktrace", "stack_trace", "traceback", "stack", "exc_info")


@dataclass(frozen=True)
class FullJob:
    text: str
    cut: bool
    backtrace: str | None


def full_job(raw: bytes) -> FullJob:
    """The redacted, bounded whole of `raw` (and its backtrace apart, when it names one)."""
    decoded = _object(raw)
    if decoded is None:
        head = raw[: FULL_MAX * 2].decode("utf-8", errors="backslashreplace")
        text, cut = _cut(redact_text(head))
        return FullJob(text=text, cut=cut or len(raw) > FULL_MAX * 2, backtrace=None)
    redacted = redact_value(decoded)
    text, cut = _cut(json.dumps(redacted, indent=2, ensure_ascii=False))
    return FullJob(text=text, cut=cut, backtrace=_backtrace(redacted))


def _object(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > PARSE_MAX:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _backtrace(job: dict[str, Any]) -> str | None:
    for name in BACKTRACE_FIELDS:
        value = job.get(name)
        if isinstance(value, list) and value:
            return _cut("\n".join(str(line) for line in value))[0]
        if isinstance(value, str) and value.strip():
            return _cut(value)[0]
    return None


def _cut(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= FULL_MAX else (text[:FULL_MAX], True)
