"""Normalization: whatever bytes a producer wrote become one (not yet redacted) DeadLetter.

This is the first stage of the intake (`bridge.intake.chain`: normalize → redact →
fingerprint, docs/design.md sections 1 and 3). `parse_entry` never raises and
bounds its work: an entry over `max_parse_bytes` is not parsed at all, every
text is cut (ids keep a digest of what was cut) and stripped of control and
invisible characters, and the payload is pruned to a small JSON value before
anything else looks at it.
"""

from __future__ import annotations

import gc
import json
from datetime import UTC, datetime
from typing import Any

from bridge.core.claimed import entry_digest
from bridge.core.models import DeadLetter
from bridge.core.names import queue_of
from bridge.core.trace_context import TraceContext
from bridge.core.untrusted import escape_controls, short_digest, strip_invisible
from bridge.intake.streamed_fields import read_top_fields

DEFAULT_MAX_PARSE_BYTES = 1024 * 1024
MAX_ERROR_CHARS = 8192
MAX_FIELD_CHARS = 512
MAX_KEY_CHARS = 128
MAX_DEPTH = 64
TOO_DEEP = "[TRUNCATED: nested too deeply]"

_JOB_ID_FIELDS = ("job_id", "task_id", "jid", "id")
_JOB_NAME_FIELDS = ("job_name", "job_type", "class", "name", "func_name")
_ATTEMPT_FIELDS = ("attempts", "attemptsMade", "retry_count")
_CORRELATION_FIELDS = ("correlation_id", "correlationId", "request_id", "trace_id")
_ERROR_FIELDS = ("last_error", "error", "error_message", "failedReason", "exception", "exc_info")
_FAILED_AT_FIELDS = ("first_failed_at", "failed_at", "failedAt")
_PAYLOAD_FIELDS = ("params", "payload", "args", "data", "kwargs")
# What a streamed read of an entry too big to parse looks for (`identity_of`): one value per group
# ends the read; the extra names (the payload's own `queue` among them: the route's queue comes
# from the source key) are kept when met before that.
IDENTITY_GROUPS = (_JOB_ID_FIELDS, (*_JOB_NAME_FIELDS, "description"), _ATTEMPT_FIELDS, _ERROR_FIELDS)
IDENTITY_EXTRA = ("queue", "error_class", *_CORRELATION_FIELDS, *_FAILED_AT_FIELDS)
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


raw_digest = entry_digest  # first 16 hex digits of SHA-256 of the raw entry bytes (one definition)


def clean_text(text: str, limit: int) -> str:
    """Cut to `limit` with a marker, then drop control and invisible characters.

    Cutting comes first so a 20 MB string costs no more than a small one.
    CRLF becomes LF and a lone CR shows as `\x0d` (it could overwrite a line on a
    terminal); lone surrogates are escaped so the envelope always serializes.
    """
    if len(text) > limit:
        text = f"{text[:limit]}…[truncated {len(text) - limit} chars]"
    text = strip_invisible(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\\x0d")
    if not text.isascii():
        text = text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text


def clean_id(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """An id, cut and stripped like `clean_text`, that never collides with another: when cutting
    or stripping changed it, it carries a digest of the original. Tab, CR and LF are shown
    escaped (an id cannot forge a log line)."""
    cleaned = strip_invisible(text[:limit])
    if len(text) > limit or len(cleaned) != len(text):
        cleaned = f"{cleaned}…[sha256:{short_digest(text, 16)}]"
    return clean_text(escape_controls(cleaned), limit + 64)


def route_queue(source_key: str) -> str:
    """The route's queue: the source's own (`dead_letter:{carts}` → `carts`), capped."""
    return clean_id(queue_of(source_key))


def parse_entry(
    raw: bytes, source_key: str, *, excerpt_max: int = 2048, max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES
) -> DeadLetter:
    """The normalized envelope of one raw DLQ entry: not redacted, no fingerprint (never raises)."""
    digest = raw_digest(raw)
    try:
        obj, parse_error = _decode(raw, max_parse_bytes)
        if obj is None and len(raw) > max_parse_bytes:
            return identity_of(raw, source_key, digest, parse_error, excerpt_max)
        if obj is None:
            return unparseable(raw, source_key, digest, parse_error, excerpt_max)
        return _from_object(obj, source_key, digest, excerpt_max)
    except Exception as exc:  # last line of defence: never lose an entry to a parser bug
        return unparseable(raw, source_key, digest, f"normalization failed: {type(exc).__name__}", excerpt_max)


def _decode(raw: bytes, max_parse_bytes: int) -> tuple[dict[str, Any] | None, str]:
    if len(raw) > max_parse_bytes:
        return None, (
            f"oversized dead letter: {len(raw)} bytes, over sources.max_parse_bytes ({max_parse_bytes});"
            " not parsed, the bytes are kept intact in the archive"
        )
    if not raw.strip():
        return None, "empty entry"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (invalid byte at offset {exc.start})"
    try:
        obj = _loads_without_gc(text)
    except RecursionError:
        return None, "JSON nested too deeply"
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg}, char {exc.pos})"
    except ValueError:
        return None, "not JSON (number out of range)"
    if not isinstance(obj, dict):
        return None, f"JSON {_JSON_TYPES.get(type(obj), 'value')}, not an object"
    return obj, ""


def _loads_without_gc(text: str) -> Any:
    """`json.loads` with the cyclic GC paused: a 1 MB `[[],[],…]` makes 350,000 lists, and the
    collections they trigger cost 6x the parse itself (JSON values hold no cycles)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if was_enabled:
            gc.enable()


def unparseable(raw: bytes, source_key: str, digest: str, why: str, excerpt_max: int) -> DeadLetter:
    """The envelope of an entry that is not a JSON object: an excerpt of its head and the reason."""
    head = raw[: excerpt_max * 4].decode("utf-8", errors="backslashreplace")
    excerpt = clean_text(head, excerpt_max) if head.strip() else None
    return DeadLetter(
        source_key=clean_id(source_key),
        queue=route_queue(source_key),
        job_id=f"sha256:{digest}",
        payload_excerpt=excerpt,
        raw_digest=digest,
        parse_error=why,
    )


def identity_of(raw: bytes, source_key: str, digest: str, why: str, excerpt_max: int) -> DeadLetter:
    """The envelope of an entry not parsed whole: `unparseable`, plus the job id, name, queue,
    attempts and error a streamed read of its top-level scalars finds (`bridge.intake.streamed_fields`),
    cleaned and cut exactly as a parsed entry's are."""
    bare = unparseable(raw, source_key, digest, why, excerpt_max)
    fields = read_top_fields(
        raw, IDENTITY_GROUPS, extra=IDENTITY_EXTRA, capped=_ERROR_FIELDS, cap_bytes=MAX_ERROR_CHARS * 4
    )
    if not fields:
        return bare
    named = _from_object(fields, source_key, digest, excerpt_max)
    return named.model_copy(update={"parse_error": why, "payload_excerpt": bare.payload_excerpt})


def _from_object(obj: dict[str, Any], source_key: str, digest: str, excerpt_max: int) -> DeadLetter:
    return DeadLetter(
        source_key=clean_id(source_key),
        queue=route_queue(source_key),
        reported_queue=_first_text(obj, ("queue",)),
        job_id=_first_id(obj, _JOB_ID_FIELDS) or f"sha256:{digest}",
        job_name=_job_name(obj),
        attempts=_first_int(obj, _ATTEMPT_FIELDS),
        correlation_id=_first_id(obj, _CORRELATION_FIELDS),
        last_error=_error_text(obj),
        first_failed_at=_failed_at(obj),
        payload_excerpt=_excerpt(obj, excerpt_max),
        raw_digest=digest,
        **_trace_fields(obj),
    )


def _trace_fields(obj: dict[str, Any]) -> dict[str, str]:
    """`traceparent` and `tracestate` when the entry holds a valid W3C trace context; none otherwise."""
    context = TraceContext.parse(obj.get("traceparent"), obj.get("tracestate"))
    if context is None:
        return {}
    fields = {"traceparent": context.traceparent}
    if context.tracestate is not None:
        fields["tracestate"] = context.tracestate
    return fields


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        text = str(value).strip()
        return text or None
    return None


def _first_text(obj: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        text = _scalar_text(obj.get(name))
        if text is not None:
            return clean_text(text, MAX_FIELD_CHARS)
    return None


def _first_id(obj: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        text = _scalar_text(obj.get(name))
        if text is not None:
            return clean_id(text)
    return None


def _job_name(obj: dict[str, Any]) -> str | None:
    """`job_name`, `job_type`, `class`, `name`, RQ's `func_name`, or the function of RQ's `description`."""
    name = _first_text(obj, _JOB_NAME_FIELDS)
    if name is not None:
        return name
    description = _scalar_text(obj.get("description"))
    if description is None:
        return None
    function = description[: MAX_FIELD_CHARS * 2].partition("(")[0].strip()
    return clean_text(function, MAX_FIELD_CHARS) if function else None


def _first_int(obj: dict[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = obj.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and abs(value) < 10**18:
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
            pruned = json.dumps(prune(value, MAX_ERROR_CHARS), ensure_ascii=False)
            text = clean_text(pruned, MAX_ERROR_CHARS)
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
    """The payload as text: a string cut to `excerpt_max`, a structure pruned to valid JSON."""
    given = obj.get("payload_excerpt")
    if isinstance(given, str) and given:
        return clean_text(given, excerpt_max)
    if isinstance(given, dict | list) and given:  # a producer that wrote the excerpt as JSON, not text
        return json.dumps(prune(given, excerpt_max), ensure_ascii=False)
    for name in _PAYLOAD_FIELDS:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                return clean_text(value, excerpt_max)
            return json.dumps(prune(value, excerpt_max), ensure_ascii=False)
    return None


def prune(value: Any, budget: int) -> Any:
    """A copy of a JSON value holding about `budget` characters at most, still valid JSON.

    Strings are cut, containers stop when the budget is spent, keys are capped
    (with a digest, so capped keys stay distinct), depth is capped. The
    redaction stage walks this copy, never the producer's whole value.
    """
    left = [budget]
    return _prune(value, left, 0)


def _prune(value: Any, left: list[int], depth: int) -> Any:
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return _prune_dict(value, left, depth)
    if isinstance(value, list):
        return _prune_list(value, left, depth)
    if isinstance(value, str):
        text = clean_text(value, max(left[0], 16))
        left[0] -= len(text) + 2
        return text
    left[0] -= 8
    return value if isinstance(value, int | float | bool) or value is None else str(value)


def _prune_dict(value: dict[Any, Any], left: list[int], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for count, (key, item) in enumerate(value.items()):
        if left[0] <= 0:
            out["…"] = f"[{len(value) - count} more keys]"
            break
        name = clean_id(str(key), MAX_KEY_CHARS)
        left[0] -= len(name) + 4
        out[name] = _prune(item, left, depth + 1)
    return out


def _prune_list(value: list[Any], left: list[int], depth: int) -> list[Any]:
    out: list[Any] = []
    for count, item in enumerate(value):
        if left[0] <= 0:
            out.append(f"…[{len(value) - count} more items]")
            break
        left[0] -= 2
        out.append(_prune(item, left, depth + 1))
    return out
