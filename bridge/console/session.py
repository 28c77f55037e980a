"""Signed cookies of the console: the session and the sign-in state (docs/design.md, "Console roles").

Both are HS256 JWTs (joserfc, authlib's JOSE library, imported by the first `Signer`: about 10 MB
that a bridge without `session_secret` never loads) under `[console.auth] session_secret`, with
an `exp`: a cookie past its expiry, or with a bad signature, is no cookie. The
session cookie is HttpOnly and `SameSite=Strict`; the sign-in state cookie
(state, nonce, PKCE verifier) is `SameSite=Lax`, because the provider's
redirect back to the callback is a cross-site navigation. A session carries a
random CSRF token that every action must echo in `X-CSRF-Token`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.responses import Response

SESSION_COOKIE = "dlqb_session"
LOGIN_COOKIE = "dlqb_login"
LOGIN_TTL_S = 600.0
HEADER = {"alg": "HS256"}


class Signer:
    """Sign and check claims with an expiry."""

    def __init__(self, secret: str, clock: Callable[[], float] = time.time) -> None:
        from joserfc.jwk import OctKey

        self._raw = hashlib.sha256(b"dlq-bridge console session\0" + secret.encode()).digest()
        self._key = OctKey.import_key(self._raw)
        self._clock = clock

    def sign(self, claims: Mapping[str, Any], ttl_s: float) -> str:
        from joserfc import jwt

        now = int(self._clock())
        return jwt.encode(HEADER, {**claims, "iat": now, "exp": now + int(ttl_s)}, self._key, algorithms=["HS256"])

    def check(self, token: str | None) -> dict[str, Any] | None:
        """The claims, or None: absent, forged, malformed or expired."""
        if not token:
            return None
        from joserfc import jwt
        from joserfc.errors import JoseError

        try:
            decoded = jwt.decode(token, self._key, algorithms=["HS256"])
            jwt.JWTClaimsRegistry(now=int(self._clock()), exp={"essential": True}).validate(decoded.claims)
        except (JoseError, ValueError, TypeError):
            return None
        return dict(decoded.claims)

    def csrf_for(self, subject: str) -> str:
        """A CSRF token bound to `subject` (trusted-proxy mode, where there is no session to keep one)."""
        return hmac.new(self._raw, b"csrf\0" + subject.encode(), hashlib.sha256).hexdigest()


def new_csrf() -> str:
    return secrets.token_urlsafe(24)


def set_cookie(response: Response, name: str, value: str, ttl_s: float, *, secure: bool, strict: bool) -> None:
    response.set_cookie(name, value, max_age=int(ttl_s), path="/", httponly=True, secure=secure,
                        samesite="strict" if strict else "lax")


def clear_cookie(response: Response, name: str, *, secure: bool, strict: bool) -> None:
    response.delete_cookie(name, path="/", httponly=True, secure=secure, samesite="strict" if strict else "lax")
