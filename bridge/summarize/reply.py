"""Reading a model reply: find the first JSON object, validate it strictly.

The reply is untrusted data. It may wrap the object in prose or a code
fence; anything else (no object, extra keys, broken limits, an unknown
runbook id) is refused with the fallback reason `invalid_json` or `schema`.
Accepted text is cleaned: control characters dropped, secrets redacted, and
URLs that the dead letter did not already contain removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from bridge.errors import SummaryError
from bridge.models import SummaryDraft
from bridge.redact import redact_text

MAX_REPLY_CHARS = 32 * 1024
MAX_OBJECT_STARTS = 64
URL_REMOVED = "[link removed]"

_CONTROL = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]"
)
_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"'`]+")


def content_of(response: Any) -> str:
    """`choices[0].message.content` of a chat completion, else SummaryError(invalid_json)."""
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise SummaryError("invalid_json", "reply has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise SummaryError("invalid_json", "reply content is not text")
    return content


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (plain, fenced, or inside prose), or None."""
    text = text[:MAX_REPLY_CHARS]
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start >= 0 and tries < MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, _end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def parse_reply(content: str, runbook_ids: Collection[str], known_text: str = "") -> SummaryDraft:
    """Validate a reply into a SummaryDraft; raises SummaryError(invalid_json | schema).

    `known_text` is the text the model was given: URLs it contains may stay,
    any other URL in the reply is removed.
    """
    found = extract_json_object(content)
    if found is None:
        raise SummaryError("invalid_json", "reply holds no JSON object")
    return validate_draft(found, runbook_ids, known_text)


def validate_draft(
    found: dict[str, Any], runbook_ids: Collection[str], known_text: str = ""
) -> SummaryDraft:
    try:
        draft = SummaryDraft.model_validate_json(json.dumps(found), strict=True)
    except ValidationError as exc:
        fields = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
        raise SummaryError("schema", f"reply breaks the schema at {', '.join(fields)}") from None
    if draft.runbook_hint and draft.runbook_hint not in runbook_ids:
        raise SummaryError("schema", "runbook_hint is not a known runbook id")
    return sanitize(draft, known_text)


def sanitize(draft: SummaryDraft, known_text: str) -> SummaryDraft:
    """Plain, safe text only: no control characters, secrets or new URLs."""

    def clean(text: str, limit: int) -> str:
        text = _CONTROL.sub("", text)
        text = _URL.sub(lambda m: m.group(0) if m.group(0) in known_text else URL_REMOVED, text)
        text = redact_text(text).strip() or "-"
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

    return SummaryDraft(
        title=clean(draft.title, 120),
        severity=draft.severity,
        likely_cause=clean(draft.likely_cause, 500),
        next_steps=[clean(step, 200) for step in draft.next_steps],
        runbook_hint=draft.runbook_hint,
    )
