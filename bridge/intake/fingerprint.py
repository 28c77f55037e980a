"""Failure fingerprints: identical failures of one DLQ share one, whatever their ids.

The last intake stage (docs/design.md, section 3): a hash of the source key,
the job name, the error class and the error message with numbers, ids and
hex runs folded. The source key is part of it, so an entry of one DLQ can
never seed the cached summary of another.

The folding patterns are linear on Python's `re` (each has one way to
match at a start and no nested repetition; many short matches are cheap,
unlike RE2's per-match cost in Python); the error class is found by a plain
scan of the first lines, no regular expression.
"""

from __future__ import annotations

import hashlib
import re

from bridge.core.models import DeadLetter

_CLASS_SUFFIXES = ("Error", "Exception", "Timeout", "Exit", "Interrupt", "Fault", "Failure", "Refused")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_MAX_SCAN_LINES = 200
_FOLDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b[0-9a-fA-F]{6,}\b"), ""),  # hex runs holding a digit (checked in _fold_hex)
    (re.compile(r"[0-9]+(?:\.[0-9]+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
)
_MESSAGE_CHARS = 500


def _class_in_line(line: str) -> str:
    """`pkg.ValueError` when the line starts (after blanks) with an exception class name."""
    stripped = line.lstrip()
    end = 0
    while end < len(stripped) and stripped[end] in _IDENT_CHARS:
        end += 1
    ident = stripped[:end]
    if not ident or not (ident[0].isalpha() or ident[0] == "_"):
        return ""
    parts = ident.split(".")
    for stop in range(len(parts), 0, -1):  # longest dotted prefix that names a class
        candidate = ".".join(parts[:stop])
        if candidate.endswith(_CLASS_SUFFIXES):
            return candidate
    return ""


def error_class(last_error: str | None) -> str:
    """The exception class named in an error text, or "" when there is none.

    The class starts the text, or (in a traceback) the first line after the
    `Traceback` header that starts with one.
    """
    if not last_error:
        return ""
    lines = last_error[: _MESSAGE_CHARS * 16].split("\n", _MAX_SCAN_LINES)[:_MAX_SCAN_LINES]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return ""
    if not lines[first].lstrip().startswith("Traceback"):
        return _class_in_line(lines[first])
    return next((found for line in lines[first + 1 :] if (found := _class_in_line(line))), "")


def _fold_hex(match: re.Match[str]) -> str:
    run = match.group(0)
    return "<hex>" if any(ch.isdigit() for ch in run) else run


def fold_message(message: str) -> str:
    """Fold numbers, ids and hex runs so repeats of one failure look the same."""
    folded = message[: _MESSAGE_CHARS * 4]
    for pattern, replacement in _FOLDS:
        folded = pattern.sub(_fold_hex if replacement == "" else replacement, folded)
    return folded.strip()[:_MESSAGE_CHARS]


def fingerprint(source_key: str, job_name: str | None, last_error: str | None, parse_error: str | None) -> str:
    """16 hex digits naming one kind of failure in one DLQ."""
    message = last_error if last_error is not None else f"unparseable: {parse_error or ''}"
    parts = (source_key, job_name or "", error_class(last_error), fold_message(message))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", errors="backslashreplace")).hexdigest()[:16]


def with_fingerprint(dead_letter: DeadLetter) -> DeadLetter:
    """The fingerprint stage: the redacted envelope with its fingerprint set."""
    dl = dead_letter
    value = fingerprint(dl.source_key, dl.job_name, dl.last_error, dl.parse_error)
    return dl.model_copy(update={"fingerprint": value})
