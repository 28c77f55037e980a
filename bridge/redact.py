"""Secret redaction, applied before anything leaves the process (DESIGN section 3)."""

from __future__ import annotations

import itertools
import re
from typing import Any

REDACTED = "[REDACTED]"
MAX_DEPTH = 64
TOO_DEEP = "[TRUNCATED: nested too deeply]"

# Compared against key names folded to lowercase letters and digits only,
# so apiKey, API-KEY, api_key and x-api-key all match "apikey".
_SENSITIVE_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "authorization",
    "apikey",
    "cookie",
    "creditcard",
    "cardnumber",
    "cvv",
    "privatekey",
    "accesskey",
    "sessionid",
    "signature",
    "credentials",
)
_KEY_NAME = (
    r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|authorization|api[_-]?key"
    r"|cookie|credit[_-]?card|card[_-]?number|cvv|private[_-]?key|access[_-]?key"
    r"|session[_-]?id|signature|credentials)[A-Za-z0-9_.-]*"
)
# (needles, pattern, replacement): a pattern runs only when one of its lowercase
# needles occurs in the lowercased text, so clean text costs one scan per needle.
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    # -----BEGIN RSA PRIVATE KEY----- … -----END RSA PRIVATE KEY-----
    (
        ("-----begin",),
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
        REDACTED,
    ),
    # scheme://user:pass@host → scheme://[REDACTED]@host
    (("://",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@'\"]*:[^/\s@'\"]*@"), rf"\1{REDACTED}@"),
    # Authorization: Bearer xyz / Basic xyz
    (
        ("bearer", "basic", "token"),
        re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"),
        rf"\1 {REDACTED}",
    ),
    # "password": "x", password=x, api-key: x, ?token=x
    (
        ("pass", "secret", "token", "auth", "key", "cookie", "card", "cvv", "session", "signature", "credential"),
        re.compile(
            rf"(?i)(\"?\b{_KEY_NAME}\"?\s*[=:]\s*)(?!\"?\[REDACTED\])"
            rf"(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s,;&\"'}})\]]+)"
        ),
        rf"\1{REDACTED}",
    ),
    (("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),  # AWS access key ids
    (("xox",), re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack tokens
    (("hooks.slack",), re.compile(r"(?i)https://hooks\.slack\.com/[^\s\"'<>]+"), REDACTED),  # Slack webhooks
    (("gh",), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), REDACTED),  # GitHub tokens
    (("_live_", "_test_"), re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}\b"), REDACTED),  # Stripe
    (("whsec_",), re.compile(r"\bwhsec_[A-Za-z0-9+/=]{10,}"), REDACTED),  # webhook secrets
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"), REDACTED),  # JWT
)
_ANY_NEEDLE = re.compile(
    "|".join(re.escape(n) for needles, _, _ in _PATTERNS for n in needles) + r"|\d[ -]?\d[ -]?\d[ -]?\d",
    re.IGNORECASE,
)
_CARD_NUMBER = re.compile(r"\b(?:\d[ -]?){13,19}\b")
_DIGIT_RUN = re.compile(r"\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d[ -]?\d")


def is_sensitive_key(name: str) -> bool:
    folded = re.sub(r"[^a-z0-9]", "", name.lower())
    return any(part in folded for part in _SENSITIVE_PARTS)


def redact_text(text: str) -> str:
    """Replace token-shaped strings and `key=value` secrets inside free text."""
    if not _ANY_NEEDLE.search(text):  # the common case: nothing secret-shaped at all
        return text
    lowered = text.lower()
    for needles, pattern, replacement in _PATTERNS:
        if any(needle in lowered for needle in needles):
            text = pattern.sub(replacement, text)
    if _DIGIT_RUN.search(text):
        text = _CARD_NUMBER.sub(REDACTED, text)
    return text


def redact_value(value: Any, depth: int = 0, *, max_items: int = 1_000_000, max_chars: int = 10**9) -> Any:
    """Redact a decoded JSON value: sensitive keys' values and secrets inside strings.

    `max_items` and `max_chars` bound the walk: longer lists and objects keep their
    first items, longer strings are cut (before redaction, so cost stays bounded).
    """
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return {
            str(k): REDACTED
            if is_sensitive_key(str(k))
            else redact_value(v, depth + 1, max_items=max_items, max_chars=max_chars)
            for k, v in itertools.islice(value.items(), max_items)
        }
    if isinstance(value, list):
        return [redact_value(v, depth + 1, max_items=max_items, max_chars=max_chars) for v in value[:max_items]]
    if isinstance(value, str):
        return redact_text(value[:max_chars])
    return value
