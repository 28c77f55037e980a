"""The secret shapes redaction looks for, compiled with RE2 (linear time, no backtracking).

Every pattern here runs on `google-re2`: its time is linear in the text
whatever the text holds (docs/design.md, section 3). Formats follow the
rules of public secret scanners (gitleaks) rather than guesses.
"""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 32 << 20  # room for the DFA on 256 KB inputs; still linear


def compile_re2(pattern: str) -> Any:
    """An RE2 pattern (`re2._Regexp`; the package ships no type hints)."""
    return re2.compile(pattern, options=_OPTIONS)


# Key names whose values are secrets. Substrings match anywhere in a key
# (`x_api_key`, `dbPassword`); words only as a whole part of the key name
# (`db_pass`, `X-Auth`, but not `author`, `spinner` or `compass`).
KEY_SUBSTRINGS = (
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
    "cvc",
    "privatekey",
    "accesskey",
    "accountkey",
    "sessionid",
    "signature",
    "credential",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "pwd",
    "connectionstring",
)
KEY_WORDS = frozenset({"pass", "pw", "auth", "sas", "pin", "otp", "private", "sig", "secrets"})

_SUBSTRING_RE = (
    r"password|passwd|passphrase|secret|token|authorization|api[_.-]?key|cookie|credit[_.-]?card"
    r"|card[_.-]?number|cvv|cvc|private[_.-]?key|access[_.-]?key|account[_.-]?key|session[_.-]?id"
    r"|signature|credential|signing[_.-]?key|encryption[_.-]?key|master[_.-]?key|pwd"
    r"|connection[_.-]?string"
)
_WORD_RE = r"pass|pw|auth|sas|pin|otp|private|sig"
# A key in free text: `db_password`, `X-Api-Key`, `db_pass`, `sig`.
KEY_NAME = (
    rf"(?:[A-Za-z0-9_.-]*(?:{_SUBSTRING_RE})[A-Za-z0-9_.-]*"
    rf"|(?:[A-Za-z0-9]+[_.-])*(?:{_WORD_RE})(?:[_.-][A-Za-z0-9]+)*)"
)
# What follows a key: `=`, `:`, `=>`, with optional quotes (also JSON-escaped ones).
_SEPARATOR = r"""(?:\\?["'])?\s*(?:=>|[=:])\s*"""
# The value: a marker already there, a (JSON-escaped) quoted string, a flat
# object, or a bare word (with the schemes it names: `token: Bearer abc`). An
# unterminated string runs to the end of the text.
_VALUE = (
    r"""(?:\[REDACTED(?::[0-9a-f]{8})?\]"""
    r"""|\\"[^"]*(?:"|$)"""
    r"""|"(?:[^"\\]|\\.)*(?:"|$)"""
    r"""|'(?:[^'\\]|\\.)*(?:'|$)"""
    r"""|\{[^{}]*(?:\}|$)"""
    r"""|(?i:(?:bearer|basic|token)\s+)*[^\s,;&"'<>(){}\[\]]+)"""
)
# A key and its separator; the value is matched from there, up to the next key at most.
KEY_SEPARATOR = compile_re2(rf"(?i)\b{KEY_NAME}{_SEPARATOR}")
VALUE = compile_re2(_VALUE)
# <password>x</password>, <db_pass attr="1">x</db_pass>
XML_ELEMENT = compile_re2(rf"(?i)(<{KEY_NAME}(?:\s[^<>]*)?>)[^<]*")

PRIVATE_KEY_BLOCK = compile_re2(
    r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)
# scheme://user:pass@host; the password may hold `/` and `@` (the last `@` wins).
URL_USERINFO = compile_re2(r"""(?i)\b([a-z][a-z0-9+.-]*://)[^\s:/?#@'"<>]*:[^\s'"<>]*@""")
# `Bearer abc…`, `token=abc`, and `token: Bearer abc…` whole (the value may name its own scheme).
AUTH_SCHEME = compile_re2(
    r"(?i)\b(bearer|basic|token)(?:(\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(\s*[:=]\s*)(?:(?:bearer|basic|token)\s+)*[A-Za-z0-9._~+/=-]+)"
)
# Token shapes with a recognisable prefix, one alternation, one scan.
TOKEN_SHAPES = compile_re2(
    "|".join(
        (
            r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}\b",  # AWS access key id
            r"\bxox(?:[abposre]|e\.xox[bp])-[A-Za-z0-9-]{8,}",  # Slack tokens (xoxb, xoxp, xoxe…)
            r"\b(?i:https?://hooks\.slack(?:-gov)?\.com)/[^\s\"'<>]+",  # Slack webhook URLs
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained tokens
            r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
            r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
            r"\bsk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\bya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access token
            r"\bwhsec_[A-Za-z0-9+/=]{10,}",  # webhook secrets
            r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",  # SendGrid
            r"\bnpm_[A-Za-z0-9]{36}",  # npm
            r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}",  # PyPI
            r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",  # Shopify
            r"\bdop_v1_[a-f0-9]{64}",  # DigitalOcean
            r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",  # JWT (signed or not)
        )
    )
)
# Needles: a pattern can only match text (case-folded) holding one of its needles.
# Checking them is a few C-speed substring scans, far cheaper than an RE2 call
# on the many short strings of a payload (docs/design.md, section 3).
KEY_NEEDLES = (
    "pass", "pw", "secret", "token", "auth", "key", "cookie", "card", "cvv", "cvc", "session", "sig",
    "credential", "sas", "pin", "otp", "private", "connection",
)
TOKEN_NEEDLES = (
    "akia", "asia", "abia", "acca", "a3t", "xox", "hooks.slack", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "github_pat_", "glpat-", "_live_", "_test_", "sk-", "aiza", "ya29.", "whsec_", "sg.", "npm_", "pypi-",
    "shp", "dop_v1_", "eyj",
)
# 13-19 digits, maybe grouped by spaces or dashes; a Luhn check decides.
CARD_NUMBER = compile_re2(r"\b\d(?:[ -]?\d){12,18}\b")
