"""Reading a model reply: find the first JSON object, clean its text.

The reply is untrusted data. It may wrap the object in prose or a code
fence; bridge.summarize.salvage then checks and repairs it field by field.
`validate_draft` is the strict check for drafts the bridge stored itself
(the summary cache). Every text kept is cleaned: invisible and format characters dropped, full-width
and other compatibility forms folded (NFKC), every link removed — URLs of any
scheme, `mailto:`/`javascript:`-style targets, `www.` and bare domains — unless
it lies under the configured runbook base URL, and secrets redacted
(docs/design.md, section 4: the model output never chooses a URL).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from bridge.core.errors import SummaryError
from bridge.core.models import SummaryDraft
from bridge.core.untrusted import strip_invisible
from bridge.intake.redact import redact_text
from bridge.intake.secret_patterns import compile_re2

MAX_REPLY_CHARS = 32 * 1024
MAX_OBJECT_STARTS = 64
URL_REMOVED = "[link removed]"

_TLDS = (
    "com|net|org|edu|gov|mil|int|info|biz|io|co|ai|app|dev|me|xyz|online|site|top|club|shop|store|link"
    "|click|live|zip|mov|icu|vip|work|tech|cloud|page|email|login|support|help|security|example|test|local"
    "|localhost|onion|ru|cn|uk|de|fr|jp|us|ly|gg|to|cc|tk|ml|ga|cf|gq|in|br|nl|eu|ca|au|es|it|ch|se|no|pw|su|tv|ws"
)
_LINK = compile_re2(
    r"(?i)(?:\b[a-z][a-z0-9+.-]*://[^\s<>\"'`]*"
    r"|\b(?:mailto|javascript|vbscript|data|file|tel|sms|callto|intent|slack):[^\s<>\"'`]*"
    r"|\bwww\.[^\s<>\"'`]*"
    rf"|\b(?:[a-z0-9-]+\.)+(?:{_TLDS}|xn--[a-z0-9-]+)\b(?:[:/][^\s<>\"'`]*)?)"
)


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


def validate_draft(
    found: dict[str, Any], runbook_ids: Collection[str], *, runbook_base: str | None = None
) -> SummaryDraft:
    """A stored draft, strictly: any fault is SummaryError(schema) (the cache reads its own writes)."""
    try:
        draft = SummaryDraft.model_validate_json(json.dumps(found), strict=True)
    except ValidationError as exc:
        fields = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
        raise SummaryError("schema", f"reply breaks the schema at {', '.join(fields)}") from None
    if draft.runbook_hint and draft.runbook_hint not in runbook_ids:
        raise SummaryError("schema", "runbook_hint is not a known runbook id")
    return sanitize(draft, runbook_base=runbook_base)


def under_base(url: str, base: str | None) -> bool:
    """True when `url` is the runbook base URL or lies below it (same scheme, host and path prefix)."""
    if not base:
        return False
    root = base.rstrip("/")
    return url == root or url.startswith(root + "/") or url.startswith(root + "#") or url.startswith(root + "?")


def remove_links(text: str, runbook_base: str | None = None) -> str:
    """Every link in `text` becomes `[link removed]`, except those under `runbook_base`."""
    text = strip_invisible(unicodedata.normalize("NFKC", strip_invisible(text)))
    return str(_LINK.sub(lambda m: m.group(0) if under_base(m.group(0), runbook_base) else URL_REMOVED, text))


_MENTION_TOKEN = re.compile(r"<[!@#][^<>\s]{0,80}>")  # Slack's <!channel>, <!here>, <@U123>, <#C123>, <!subteam^…>
_BARE_MENTION = re.compile(r"@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)


def remove_mentions(text: str) -> str:
    """Mentions in model text are dropped (`<!channel>`, `<@U…>`) or made inert (`@here` → `here`),
    so no sink, and no receiver of a webhook body, can ping people with model-written text."""
    return _BARE_MENTION.sub("", _MENTION_TOKEN.sub("", text))


def clean_text(text: str, runbook_base: str | None = None) -> str:
    """Model text made plain and safe: no invisible characters, links (but runbooks), mentions or secrets."""
    return redact_text(remove_mentions(remove_links(text, runbook_base))).strip()


def sanitize(draft: SummaryDraft, *, runbook_base: str | None = None) -> SummaryDraft:
    """Plain, safe text only: no invisible characters, links (but runbooks) or secrets."""

    def clean(text: str, limit: int) -> str:
        text = clean_text(text, runbook_base) or "-"
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

    return SummaryDraft(
        title=clean(draft.title, 120),
        severity=draft.severity,
        likely_cause=clean(draft.likely_cause, 500),
        next_steps=[clean(step, 200) for step in draft.next_steps],
        runbook_hint=draft.runbook_hint,
    )
