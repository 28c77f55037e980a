"""Webhook signatures: `X-Signature` (plain HMAC) and Standard Webhooks; the idempotency key as a header.

Sender side (the webhook sink) and receiver side (`verify`) in one place.

- `X-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>`, the key being the
  configured secret string exactly as written (UTF-8).
- Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and
  `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
  A `whsec_…` secret is base64-decoded after the prefix (as the spec and the
  official libraries do); any other secret is used as its UTF-8 bytes.

Several secrets (rotation) give several signatures, separated by spaces, in
both headers; a receiver accepts the message when any one matches.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

WHSEC_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300
MAX_SIGNATURES = 16


class SignatureError(ValueError):
    """The webhook could not be verified (missing header, stale timestamp, no match)."""


def message_id(idempotency_key: str, raw_digest: str) -> str:
    """Stable Standard Webhooks id: the same for every retry of one delivery."""
    digest = hashlib.sha256(f"{idempotency_key}\n{raw_digest}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def standard_key(secret: str) -> bytes:
    """The HMAC key for Standard Webhooks: base64-decoded `whsec_…`, else the UTF-8 bytes."""
    if secret.startswith(WHSEC_PREFIX):
        encoded = secret[len(WHSEC_PREFIX) :]
        try:
            return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a whsec_ secret must be base64 after the prefix") from None
    return secret.encode()


def x_signature(secrets: Sequence[str], body: bytes) -> str:
    """`sha256=<hex>` per secret, space separated."""
    return " ".join(
        "sha256=" + hmac.new(s.encode(), body, hashlib.sha256).hexdigest() for s in secrets
    )


def standard_signature(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64>` per secret, space separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(standard_key(s), signed, hashlib.sha256).digest()).decode()
        for s in secrets
    )


def sign_headers(
    secrets: Sequence[str], msg_id: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """The four signature headers for one request body."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "X-Signature": x_signature(secrets, body),
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": standard_signature(secrets, msg_id, ts, body),
    }


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secrets: str | Sequence[str],
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
    allow_x_signature: bool = False,
) -> dict[str, Any]:
    """Check a received webhook and return its parsed JSON body; raises SignatureError.

    Standard Webhooks headers are required (with the timestamp tolerance,
    against replays). `X-Signature` carries no timestamp, so a captured request
    could be replayed forever: it is checked only when the caller opts in with
    `allow_x_signature=True`, and only when no Standard Webhooks signature was
    sent (a failing one is never retried as `X-Signature`). `secrets` is one
    secret or several (rotation: any may match); empty or blank secrets are
    refused. Every malformed input raises SignatureError, nothing else.
    Dedupe on the signed `webhook-id`, not on an unsigned header.
    """
    wanted = _secrets(secrets)
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    if "webhook-signature" in lower:
        _verify_standard(body, lower, wanted, tolerance_s, time.time() if now is None else now)
    elif "x-signature" in lower and allow_x_signature:
        _verify_plain(body, lower["x-signature"], wanted)
    elif "x-signature" in lower:
        raise SignatureError("no webhook-signature (X-Signature alone is accepted only with allow_x_signature)")
    else:
        raise SignatureError("no signature header")
    return _json_object(body)


def _secrets(secrets: str | Sequence[str]) -> list[str]:
    wanted = [secrets] if isinstance(secrets, str) else list(secrets)
    if not wanted:
        raise SignatureError("no secret given")
    for secret in wanted:
        if not isinstance(secret, str) or not secret.strip():
            raise SignatureError("empty or blank secret")
        try:
            secret.encode()
        except UnicodeEncodeError:
            raise SignatureError("a secret must be valid text") from None
        try:
            key = standard_key(secret)
        except ValueError:
            raise SignatureError("a whsec_ secret must be base64 after the prefix") from None
        if not key:
            raise SignatureError("empty secret")
    return wanted


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        raise SignatureError("body is not JSON") from None
    if not isinstance(parsed, dict):
        raise SignatureError("body is not a JSON object")
    return parsed


def _timestamp(stamp: str) -> int:
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        raise SignatureError("bad webhook-timestamp")
    return int(stamp)


def _verify_standard(
    body: bytes, headers: Mapping[str, str], secrets: list[str], tolerance_s: float, now: float
) -> None:
    msg_id, stamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not msg_id or not stamp:
        raise SignatureError("missing webhook-id or webhook-timestamp")
    if not (msg_id.isascii() and msg_id.isprintable()) or len(msg_id) > 256:
        raise SignatureError("bad webhook-id")
    ts = _timestamp(stamp)
    if not abs(now - ts) <= tolerance_s:
        raise SignatureError("webhook-timestamp outside the tolerance")
    given = _candidates(headers["webhook-signature"])
    expected = standard_signature(secrets, msg_id, ts, body).split()
    if not _any_match(given, expected):
        raise SignatureError("no matching webhook-signature")


def _verify_plain(body: bytes, header: str, secrets: list[str]) -> None:
    if not _any_match(_candidates(header), x_signature(secrets, body).split()):
        raise SignatureError("no matching X-Signature")


def _candidates(header: str) -> set[bytes]:
    """The signatures of a header (at most 16), as bytes; anything else is no match."""
    return {part.encode("utf-8", "surrogatepass") for part in header.split()[:MAX_SIGNATURES]}


def _any_match(given: set[bytes], expected: list[str]) -> bool:
    found = False
    for candidate in given:
        for good in expected:
            found |= hmac.compare_digest(candidate, good.encode())
    return found


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def header_key(idempotency_key: str) -> str:
    """The key as an HTTP header value: printable ASCII as is, anything else %-encoded."""
    if all(0x21 <= ord(c) < 0x7F for c in idempotency_key):
        return idempotency_key
    return quote(idempotency_key, safe=_HEADER_SAFE)
