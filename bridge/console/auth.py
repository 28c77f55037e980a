"""Who is calling the console, and may they (docs/design.md, "Console roles").

A request is one `Principal`, found in this order:

1. `Authorization: Bearer <token>`: the `[console] token` (an admin, as before
   roles existed), or a `[console.auth] tokens` entry whose SHA-256 matches
   (compared in constant time). A bearer token that matches none is a 403.
2. Trusted-proxy headers (`X-Forwarded-User`, `X-Forwarded-Groups`), believed
   only when the peer address is one of `[console.auth.proxy] addresses`.
3. The signed session cookie of an OpenID Connect sign-in.
4. Nobody: `[console.auth] anonymous` (`viewer` by default: reads stay open).

A cookie or a proxy header is an ambient credential (the browser or proxy adds
it to any request), so an action from either also needs `X-CSRF-Token`, which
only the console's own pages know. A bearer token is never ambient.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException, Request
from pydantic import SecretStr

from bridge.config.console_auth import ROLES, ConsoleAuthSettings, Role
from bridge.console import roles
from bridge.console.session import SESSION_COOKIE, Signer

READ_ONLY = "the console is read-only: no token is configured ([console] token_env)"
CSRF_HEADER = "X-CSRF-Token"
NAME_MAX = 200
Via = Literal["anonymous", "token", "session", "proxy"]


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role | None
    via: Via
    csrf: str | None = None  # set for cookie and proxy callers: every action must echo it
    legacy: bool = False  # the single `[console] token` or nobody: `who` may come from the body or header


class Authenticator:
    """Finds the `Principal` of a request and enforces `roles.NEEDS`."""

    def __init__(self, token: SecretStr | None, auth: ConsoleAuthSettings) -> None:
        value = token.get_secret_value() if token is not None else ""
        self._legacy = hashlib.sha256(value.encode()).hexdigest() if value else None
        self._auth = auth
        self._networks = [ipaddress.ip_network(a, strict=False) for a in (auth.proxy.addresses if auth.proxy else [])]
        secret = auth.session_secret.get_secret_value() if auth.session_secret is not None else None
        self.signer = Signer(secret) if secret else None

    @property
    def read_only(self) -> bool:
        """Nothing configured could ever act."""
        return self._legacy is None and not self._auth.tokens and self._auth.oidc is None and self._auth.proxy is None

    @property
    def settings(self) -> ConsoleAuthSettings:
        return self._auth

    def principal(self, request: Request) -> Principal:
        scheme, _, bearer = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and bearer.strip():
            return self._token(bearer.strip())
        return self._proxied(request) or self._session(request) or self._anonymous()

    def require(self, request: Request, action: str) -> Principal:
        """The caller when it may do `action`; else 401 (nobody, may sign in) or 403 (with the role needed)."""
        needed = roles.NEEDS[action]
        unsafe = request.method not in ("GET", "HEAD", "OPTIONS")
        if unsafe and self.read_only:
            raise HTTPException(403, READ_ONLY)
        found = self.principal(request)
        if unsafe and found.csrf is not None:
            given = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(given.encode("utf-8", "replace"), found.csrf.encode()):
                raise HTTPException(403, f"this action needs the page's {CSRF_HEADER} header")
        if roles.allows(found.role, needed):
            return found
        if found.via == "anonymous":
            raise HTTPException(401, f"{roles.refusal(needed, None)}: send Authorization: Bearer <token> or sign in",
                                headers={"WWW-Authenticate": "Bearer"})
        raise HTTPException(403, roles.refusal(needed, found.role))

    def _token(self, given: str) -> Principal:
        digest = hashlib.sha256(given.encode("utf-8", "replace")).hexdigest().encode()
        matched: Principal | None = None
        if self._legacy is not None and hmac.compare_digest(digest, self._legacy.encode()):
            matched = Principal("token", "admin", "token", legacy=True)
        for entry in self._auth.tokens:  # every entry is compared: the time does not tell which matched
            if hmac.compare_digest(digest, entry.sha256.encode()) and matched is None:
                matched = Principal(entry.name, entry.role, "token")
        if matched is None:
            raise HTTPException(403, "wrong console token")
        return matched

    def _proxied(self, request: Request) -> Principal | None:
        proxy = self._auth.proxy
        if proxy is None or self.signer is None or request.client is None:
            return None
        user = (request.headers.get(proxy.user_header) or "").strip()[:NAME_MAX]
        if not user or not self._trusted(request.client.host):
            return None
        groups = [g.strip() for g in (request.headers.get(proxy.groups_header) or "").split(",") if g.strip()]
        return Principal(user, roles.role_of_groups(groups, self._auth.groups), "proxy",
                         csrf=self.signer.csrf_for(user))

    def _trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def _session(self, request: Request) -> Principal | None:
        if self.signer is None:
            return None
        claims = self.signer.check(request.cookies.get(SESSION_COOKIE))
        if claims is None or claims.get("kind") != "session":
            return None
        role = claims.get("role")
        return Principal(str(claims.get("name", ""))[:NAME_MAX], role if role in ROLES else None, "session",
                         csrf=str(claims.get("csrf", "")) or "-")

    def _anonymous(self) -> Principal:
        return Principal("anonymous", "viewer" if self._auth.anonymous == "viewer" else None, "anonymous",
                         legacy=True)
