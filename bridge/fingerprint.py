"""Failure fingerprints: identical failures share one, whatever their ids."""

from __future__ import annotations

import hashlib
import re

_ERROR_CLASS = re.compile(
    r"^\s*(?:Traceback[^\n]*\n(?:[^\n]*\n)*?)?\s*"
    r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Exit|Interrupt|Fault|Failure|Refused))\b"
)
_FOLDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
)
_MESSAGE_CHARS = 500


def error_class(last_error: str | None) -> str:
    """The exception class named in an error text, or "" when there is none."""
    if not last_error:
        return ""
    match = _ERROR_CLASS.match(last_error)
    return match.group(1) if match else ""


def fold_message(message: str) -> str:
    """Fold numbers, ids and hex runs so repeats of one failure look the same."""
    folded = message[: _MESSAGE_CHARS * 4]
    for pattern, replacement in _FOLDS:
        folded = pattern.sub(replacement, folded)
    return folded.strip()[:_MESSAGE_CHARS]


def fingerprint(queue: str, job_name: str | None, last_error: str | None, parse_error: str | None) -> str:
    """16 hex digits naming one kind of failure."""
    message = last_error if last_error is not None else f"unparseable: {parse_error or ''}"
    parts = (queue, job_name or "", error_class(last_error), fold_message(message))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]
