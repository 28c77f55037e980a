"""Secret redaction: one stage over the normalized envelope (docs/design.md, sections 1 and 3).

Every pattern runs on RE2 (`bridge.intake.secret_patterns`), so the time is linear
in the text. A field is walked once per pattern; a pattern that matches more
than `MAX_MATCHES` times in one field cuts the field there (the rest is
dropped, never shown unredacted), which bounds the per-match cost too.

Ids (job id, queue, source key, correlation id) are never collapsed into a
shared placeholder: a secret-looking id keeps a digest of the original,
`[REDACTED:<8 hex>]`, and digit runs in ids are not card numbers.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.core import names
from bridge.core.models import DeadLetter
from bridge.core.untrusted import short_digest, strip_invisible
from bridge.intake import secret_patterns as sp

REDACTED = "[REDACTED]"
CUT_MARK = "…[cut: too many secret-shaped matches]"
MAX_MATCHES = 64
MAX_DEPTH = 64
MAX_KEY_CHARS = 128
TOO_DEEP = "[TRUNCATED: nested too deeply]"


@functools.lru_cache(maxsize=4096)  # the same field names come back with every entry
def is_sensitive_key(name: str) -> bool:
    """True when a key's value is a secret: `apiKey`, `API-KEY`, `db_pass`, `pin` (not `spinner`)."""
    name = name[:MAX_KEY_CHARS]
    folded = "".join(ch for ch in name.lower() if ch.isascii() and ch.isalnum())
    if any(part in folded for part in sp.KEY_SUBSTRINGS):
        return True
    return any(word in sp.KEY_WORDS for word in key_words(name))


def key_words(name: str) -> list[str]:
    """`dbPass_HOST-x` → ["db", "pass", "host", "x"]: split at separators and camelCase."""
    words: list[str] = []
    current: list[str] = []
    previous = ""
    for ch in name:
        if not (ch.isascii() and ch.isalnum()):
            previous = ""
            if current:
                words.append("".join(current))
                current = []
            continue
        if ch.isupper() and previous.islower() and current:
            words.append("".join(current))
            current = []
        current.append(ch.lower())
        previous = ch
    if current:
        words.append("".join(current))
    return words


def bounded_sub(pattern: Any, text: str, replace: Callable[[Any], str]) -> str:
    """`pattern.sub` with at most MAX_MATCHES replacements; past that the rest is cut."""
    pieces: list[str] = []
    end = 0
    for count, match in enumerate(pattern.finditer(text)):
        if count == MAX_MATCHES:
            pieces.append(CUT_MARK)
            return "".join(pieces)
        pieces.append(text[end : match.start()])
        pieces.append(replace(match))
        end = match.end()
    pieces.append(text[end:])
    return "".join(pieces)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: Any) -> str:
    found: str = match.group(0)
    digits = "".join(ch for ch in found if ch.isdigit())
    looks_like_card = 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn_ok(digits)
    return REDACTED if looks_like_card else found


def redact_key_values(text: str) -> str:
    """`password=x`, `'token': 'x'`, `:pwd => "x"`: each value, up to the next key at most.

    Keys are found first; a value never runs into the next key, so
    `sig= 'token': 'x'` cannot hide `x` inside the value of `sig`.
    """
    found = list(itertools.islice(sp.KEY_SEPARATOR.finditer(text), MAX_MATCHES + 1))
    pieces: list[str] = []
    end = 0
    for index, key in enumerate(found[:MAX_MATCHES]):
        limit = found[index + 1].start() if index + 1 < len(found) else len(text)
        value = sp.VALUE.match(text, key.end(), limit)
        if value is None or value.group(0).startswith("[REDACTED"):
            continue
        pieces.append(text[end : key.end()])
        pieces.append(REDACTED)
        end = value.end()
    if len(found) > MAX_MATCHES:
        pieces.append(text[end : found[MAX_MATCHES].start()])
        pieces.append(CUT_MARK)
        return "".join(pieces)
    pieces.append(text[end:])
    return "".join(pieces)


Needles = Callable[[str], bool]  # may the rule match? (on the case-folded text)


def _any(*needles: str) -> Needles:
    def check(folded: str) -> bool:
        for needle in needles:  # noqa: SIM110  # a loop, no generator: runs for every rule on every string
            if needle in folded:
                return True
        return False

    return check


def _all(*checks: Needles) -> Needles:
    def check(folded: str) -> bool:
        for one in checks:  # noqa: SIM110  # as in _any
            if not one(folded):
                return False
        return True

    return check


def _digits_at_least(count: int) -> Needles:
    return lambda folded: len(folded) >= count and sum(map(folded.count, "0123456789")) >= count


@dataclass(frozen=True)
class _Rule:
    pattern: Any
    replace: Callable[[Any], str]
    may_match: Needles

    def __call__(self, text: str, folded: str) -> str:
        return bounded_sub(self.pattern, text, self.replace) if self.may_match(folded) else text


@dataclass(frozen=True)
class _KeyValueRule:
    may_match: Needles

    def __call__(self, text: str, folded: str) -> str:
        return redact_key_values(text) if self.may_match(folded) else text


_KEY = _any(*sp.KEY_NEEDLES)
_COMMON_RULES: tuple[_Rule | _KeyValueRule, ...] = (
    _Rule(sp.PRIVATE_KEY_BLOCK, lambda _m: REDACTED, _any("private key")),
    _Rule(sp.URL_USERINFO, lambda m: f"{m.group(1)}{REDACTED}@", _all(_any("://"), _any("@"))),
    # key=value first: a scheme word before a key (`Bearer = api_key: "…"`) must not take the key away
    _KeyValueRule(_all(_any("=", ":"), _KEY)),
    _Rule(
        sp.AUTH_SCHEME, lambda m: f"{m.group(1)}{m.group(2) or m.group(3)}{REDACTED}", _any("bearer", "basic", "token")
    ),
    _Rule(sp.XML_ELEMENT, lambda m: f"{m.group(1)}{REDACTED}", _all(_any("<"), _KEY)),
    _Rule(sp.TOKEN_SHAPES, lambda _m: REDACTED, _any(*sp.TOKEN_NEEDLES)),
)
_TEXT_RULES: tuple[_Rule | _KeyValueRule, ...] = (*_COMMON_RULES, _Rule(sp.CARD_NUMBER, _card, _digits_at_least(13)))


def _apply(rules: tuple[_Rule | _KeyValueRule, ...], text: str) -> str:
    folded = text.casefold()  # like RE2's (?i): `ſ` is an `s`, `K` (Kelvin sign) a `k`
    for rule in rules:
        changed = rule(text, folded)
        if changed is not text:
            text, folded = changed, changed.casefold()
    return text


def redact_text(text: str) -> str:
    """Token-shaped strings, `key=value` secrets and card numbers in free text become [REDACTED]."""
    return _apply(_TEXT_RULES, strip_invisible(text))


def redact_id(text: str) -> str:
    """Redact an id without merging ids: `[REDACTED:<8 hex of the original>]`; digit runs stay."""
    text = strip_invisible(text)
    out = _apply(_COMMON_RULES, text)
    if out == text:
        return text
    tag = f"[REDACTED:{short_digest(text)}]"
    out = out.replace(REDACTED, tag)
    return out if tag in out else f"{out}{tag}"


def redact_key_name(key: str) -> str:
    """A Redis key name as it leaves the bridge (metric labels, logs, records, cards): shown
    escaped (`names.display`), then redacted like an id, so distinct keys keep distinct names."""
    return redact_id(names.display(key))


def redact_value(value: Any, depth: int = 0) -> Any:
    """Redact a decoded JSON value: sensitive keys' values, secrets in strings and key names."""
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return {_redact_key(str(k)): _redact_item(str(k), v, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, depth + 1) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


@functools.lru_cache(maxsize=4096)  # the same field names come back with every entry
def _redact_key(key: str) -> str:
    return redact_text(key[:MAX_KEY_CHARS])


def _redact_item(key: str, value: Any, depth: int) -> Any:
    return REDACTED if is_sensitive_key(strip_invisible(key)) else redact_value(value, depth + 1)


def redact_excerpt(text: str, limit: int) -> str:
    """A payload excerpt: structurally when it is JSON (pruned by normalization), else as text; then cut."""
    redacted: str | None = None
    if text[:1] in ("{", "["):
        try:
            redacted = json.dumps(redact_value(json.loads(text)), ensure_ascii=False)
        except (ValueError, RecursionError):
            redacted = None
    if redacted is None:
        redacted = redact_text(text)
    if len(redacted) > limit:
        redacted = f"{redacted[:limit]}…[truncated {len(redacted) - limit} chars]"
    return redacted


def _optional(rule: Callable[[str], str], text: str | None) -> str | None:
    return None if text is None else rule(text)


def _kept_if_clean(text: str | None) -> str | None:
    """`text` when redaction leaves it as it is; a `tracestate` with anything secret-shaped is dropped."""
    return text if text is not None and redact_text(text) == text else None


def redact_envelope(dead_letter: DeadLetter, excerpt_max: int) -> DeadLetter:
    """The redaction stage: every text field of a normalized envelope, once (docs/design.md, section 3)."""
    dl = dead_letter
    return dl.model_copy(
        update={
            "source_key": redact_id(dl.source_key),
            "queue": redact_id(dl.queue),
            "reported_queue": _optional(redact_id, dl.reported_queue),
            "job_id": redact_id(dl.job_id),
            "job_name": _optional(redact_text, dl.job_name),
            "correlation_id": _optional(redact_id, dl.correlation_id),
            "last_error": _optional(redact_text, dl.last_error),
            "first_failed_at": _optional(redact_text, dl.first_failed_at),
            "payload_excerpt": _optional(lambda t: redact_excerpt(t, excerpt_max), dl.payload_excerpt),
            "parse_error": _optional(redact_text, dl.parse_error),
            "tracestate": _kept_if_clean(dl.tracestate),
        }
    )
