"""Who an entry is, read without parsing it whole: a streaming read of its top-level fields.

An entry over `sources.max_parse_bytes` is never parsed into Python objects, and a quarantined one
is never parsed again. Both still name their job: `read_identity` walks the JSON with ijson's C
backend (yajl2_c) and keeps only the top-level scalar fields that say who the job is (job id,
name, queue, attempts, correlation id, last error, when it failed), each cut to a bound as it
arrives, so the memory it takes does not grow with the entry (a 20 MB entry is read in well under
150 MB of RSS: bench/bench_identity.py). Anything malformed ends the read with what was found so
far; nothing here raises (docs/design.md, section 3).
"""

from __future__ import annotations

import io
from typing import Any

import ijson

JOB_ID_FIELDS = ("job_id", "task_id", "jid", "id")
JOB_NAME_FIELDS = ("job_name", "job_type", "class", "name", "func_name")
ATTEMPT_FIELDS = ("attempts", "attemptsMade", "retry_count")
CORRELATION_FIELDS = ("correlation_id", "correlationId", "request_id", "trace_id")
ERROR_FIELDS = ("last_error", "error", "error_message", "failedReason", "exception", "exc_info")
FAILED_AT_FIELDS = ("first_failed_at", "failed_at", "failedAt")
MAX_ERROR_CHARS = 8192  # the envelope's bound on an error text (`bridge.envelope` cleans and cuts)

QUARANTINE_READ_BYTES = 64 * 1024  # how much of a quarantined entry's head is read for its identity
_WANTED = frozenset(
    (*JOB_ID_FIELDS, *JOB_NAME_FIELDS, *ATTEMPT_FIELDS, *CORRELATION_FIELDS, *ERROR_FIELDS, *FAILED_AT_FIELDS,
     "queue", "error_class")
)
_SCALARS = frozenset(("string", "number", "boolean", "null"))
_CHUNK = 64 * 1024
_KEEP_CHARS = MAX_ERROR_CHARS + 64  # a kept string is cut here as it arrives (cleaned later)

try:
    _backend: Any = ijson.get_backend("yajl2_c")
except ImportError:  # no compiled backend on this platform: the pure-Python one, slower, as bounded
    _backend = ijson.get_backend("python")


def read_identity(raw: bytes) -> dict[str, Any]:
    """The top-level identity fields of a JSON object, by name (first value of each kept).

    Values are scalars only (a nested error object is skipped); strings are cut to about
    `MAX_ERROR_CHARS`. Not a JSON object, invalid, or cut short: what was read up to there.
    """
    found: dict[str, Any] = {}
    events = _backend.parse(io.BytesIO(raw), buf_size=_CHUNK, use_float=True)
    try:
        first = next(events, None)
        if first is None or first[1] != "start_map":
            return found
        for prefix, event, value in events:
            if event in _SCALARS and prefix in _WANTED and prefix not in found and "." not in prefix:
                found[prefix] = value[:_KEEP_CHARS] if isinstance(value, str) else value
    except Exception:  # ijson's JSONError, IncompleteJSONError, a decode error: keep what was read
        return found
    return found


def head_identity(raw: bytes) -> dict[str, Any]:
    """`read_identity` of the first `QUARANTINE_READ_BYTES` only: safe for an entry that killed its consumer."""
    return read_identity(raw[:QUARANTINE_READ_BYTES])

