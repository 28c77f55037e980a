"""Normalization: whatever bytes a producer wrote become one DeadLetter.

`normalize` never raises. Unparseable input becomes an envelope whose
`parse_error` says why, so it still produces an alert.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from bridge.fingerprint import fingerprint
from bridge.keys import queue_of
from bridge.models import DeadLetter
from bridge.redact import redact_text, redact_value

MAX_PARSE_BYTES = 32 * 1024 * 1024
MAX_ERROR_CHARS = 8192
MAX_FIELD_CHARS = 512

_JOB_ID_FIELDS = ("job_id", "task_id", "jid", "id")
_JOB_NAME_FIELDS = ("job_name", "job_type", "class", "name")
_ATTEMPT_FIELDS = ("attempts", "attemptsMade", "retry_count")
_CORRELATION_FIELDS = ("correlation_id", "correlationId", "request_id", "trace_id")
_ERROR_FIELDS = ("last_error", "error", "error_message", "failedReason", "exception", "exc_info")
_FAILED_AT_FIELDS = ("first_failed_at", "failed_at", "failedAt")
_PAYLOAD_FIELDS = ("params", "payload", "args", "data", "kwargs")
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def raw_digest(raw: bytes) -> str:
    """First 16 hex digits of SHA-256 of the raw entry bytes."""
    return hashlib.sha256(raw).hexdigest()[:16]


def clean_text(text: str, limit: int, *, redact: bool = True) -> str:
    """Cut to `limit` with a marker, drop control and bidi characters, redact secrets.

    Cutting comes first so a 20 MB string costs no more than a small one.
    `redact=False` is for text built from values `redact_value` already redacted.
    """
    if len(text) > limit:
        text = f"{text[:limit]}…[truncated {len(text) - limit} chars]"
    text = _CONTROL.sub("", text)
    return redact_text(text) if redact else text


def normalize(raw: bytes, source_key: str, *, excerpt_max: int = 2048) -> DeadLetter:
    """Build the envelope for one raw DLQ entry (never raises)."""
    digest = raw_digest(raw)
    try:
        obj, parse_error = _decode(raw)
        if obj is None:
            return _unparseable(raw, source_key, digest, parse_error, excerpt_max)
        return _from_object(obj, source_key, digest, excerpt_max)
    except Exception as exc:  # last line of defence: never lose an entry to a parser bug
        return _unparseable(raw, source_key, digest, f"normalization failed: {type(exc).__name__}", excerpt_max)


def _decode(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    if not raw.strip():
        return None, "empty entry"
    if len(raw) > MAX_PARSE_BYTES:
        return None, f"entry of {len(raw)} bytes is too large to parse"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (invalid byte at offset {exc.start})"
    try:
        obj = json.loads(text)
    except RecursionError:
        return None, "JSON nested too deeply"
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg}, char {exc.pos})"
    except ValueError:
        return None, "not JSON (number out of range)"
    if not isinstance(obj, dict):
        return None, f"JSON {_JSON_TYPES.get(type(obj), 'value')}, not an object"
    return obj, ""


def _unparseable(raw: bytes, source_key: str, digest: str, why: str, excerpt_max: int) -> DeadLetter:
    head = raw[: excerpt_max * 4].decode("utf-8", errors="backslashreplace")
    excerpt = clean_text(head, excerpt_max) if head.strip() else None
    queue = clean_text(queue_of(source_key), MAX_FIELD_CHARS)
    return DeadLetter(
        source_key=source_key,
        queue=queue,
        job_id=f"sha256:{digest}",
        payload_excerpt=excerpt,
        raw_digest=digest,
        parse_error=why,
        fingerprint=fingerprint(queue, None, None, why),
    )


def _from_object(obj: dict[str, Any], source_key: str, digest: str, excerpt_max: int) -> DeadLetter:
    queue = _first_text(obj, ("queue",)) or clean_text(queue_of(source_key), MAX_FIELD_CHARS)
    job_name = _first_text(obj, _JOB_NAME_FIELDS)
    last_error = _error_text(obj)
    return DeadLetter(
        source_key=source_key,
        queue=queue,
        job_id=_first_text(obj, _JOB_ID_FIELDS) or f"sha256:{digest}",
        job_name=job_name,
        attempts=_first_int(obj, _ATTEMPT_FIELDS),
        correlation_id=_first_text(obj, _CORRELATION_FIELDS),
        last_error=last_error,
        first_failed_at=_failed_at(obj),
        payload_excerpt=_excerpt(obj, excerpt_max),
        raw_digest=digest,
        fingerprint=fingerprint(queue, job_name, last_error, None),
    )


def _first_text(obj: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = obj.get(name)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str | int | float) and str(value).strip():
            return clean_text(str(value).strip(), MAX_FIELD_CHARS)
    return None


def _first_int(obj: dict[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = obj.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().isdigit() and len(value) < 19:
            return int(value)
    return None


def _error_text(obj: dict[str, Any]) -> str | None:
    for name in _ERROR_FIELDS:
        value = obj.get(name)
        if value is None or value == "" or isinstance(value, bool):
            continue
        if isinstance(value, str):
            text = clean_text(value.strip(), MAX_ERROR_CHARS)
        else:
            text = clean_text(_bounded_json(value, MAX_ERROR_CHARS), MAX_ERROR_CHARS, redact=False)
        error_class = obj.get("error_class")
        if name == "error_message" and isinstance(error_class, str) and error_class:
            text = f"{clean_text(error_class, MAX_FIELD_CHARS)}: {text}"
        return text
    return None


def _failed_at(obj: dict[str, Any]) -> str | None:
    for name in _FAILED_AT_FIELDS:
        value = obj.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = value / 1000 if value > 1e11 else value  # epoch ms (BullMQ) or s
            try:
                return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
            except (OverflowError, OSError, ValueError):
                return clean_text(str(value), MAX_FIELD_CHARS)
        if isinstance(value, str) and value.strip():
            return clean_text(value.strip(), MAX_FIELD_CHARS)
    return None


def _excerpt(obj: dict[str, Any], excerpt_max: int) -> str | None:
    given = obj.get("payload_excerpt")
    if isinstance(given, str) and given:
        return clean_text(given, excerpt_max)
    for name in _PAYLOAD_FIELDS:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                return clean_text(value, excerpt_max)
            return clean_text(_bounded_json(value, excerpt_max), excerpt_max, redact=False)
    return None


def _bounded_json(value: Any, limit: int) -> str:
    """Redacted JSON text of `value`, cut near `limit` chars; huge values are never walked whole."""
    redacted = redact_value(value, max_items=limit, max_chars=limit)
    if isinstance(redacted, str):
        return redacted
    return json.dumps(redacted, ensure_ascii=False, default=str)[: limit * 2]
