"""Sign-in with OpenID Connect: authorization code + PKCE through authlib (docs/design.md, "Console roles").

    GET  /console/login?next=/console/...     to the provider (state, nonce, S256 verifier in a signed cookie)
    GET  /console/auth/callback?code&state    code -> tokens; the ID token checked (signature by the
                                              provider's JWKS, iss, aud, exp, nonce); groups -> role;
                                              the session cookie set
    POST /console/logout                      (form field `csrf`) the session cookie cleared

The callback answers a small page that moves on with `<meta http-equiv=refresh>`
rather than a redirect: that navigation starts on the console's own origin, so
the browser sends the new `SameSite=Strict` cookie with it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import urllib.parse
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.deprecate import AuthlibDeprecationWarning
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

with warnings.catch_warnings():  # authlib 1.9 warns on import that its httpx module is deprecated (for httpx2):
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)  # it works; every `run` printed it on stderr
    from authlib.integrations.httpx_client import AsyncOAuth2Client

from bridge.config.console_auth import OidcSettings
from bridge.console import roles
from bridge.console.auth import Authenticator
from bridge.console.session import (
    LOGIN_COOKIE,
    LOGIN_TTL_S,
    SESSION_COOKIE,
    Signer,
    clear_cookie,
    new_csrf,
    set_cookie,
)

log = logging.getLogger(__name__)
LEEWAY_S = 60
ID_TOKEN_ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]
TIMEOUT_S = 10.0
FORM_MAX = 4096

Page = Callable[[str, Mapping[str, Any], int], Response]  # (template, context, status), from the pages module


def safe_next(value: str | None) -> str:
    """Where to go after sign-in: a console path only (never another site)."""
    if not value or not value.startswith("/console/") or value.startswith("//") or "\\" in value:
        return "/console/"
    return value


class OidcClient:
    """Discovery, the authorization URL and the code exchange against one provider."""

    def __init__(self, oidc: OidcSettings) -> None:
        self._oidc = oidc
        self._meta: dict[str, Any] | None = None
        self._lock = asyncio.Lock()

    async def metadata(self) -> dict[str, Any]:
        async with self._lock:
            if self._meta is None:
                url = self._oidc.issuer.rstrip("/") + "/.well-known/openid-configuration"
                async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
                    reply = await http.get(url)
                    reply.raise_for_status()
                    self._meta = dict(reply.json())
            return self._meta

    def _client(self) -> AsyncOAuth2Client:
        secret = self._oidc.client_secret.get_secret_value() if self._oidc.client_secret is not None else None
        return AsyncOAuth2Client(
            client_id=self._oidc.client_id, client_secret=secret, scope=" ".join(self._oidc.scopes),
            redirect_uri=self._oidc.redirect_url, code_challenge_method="S256", timeout=TIMEOUT_S,
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )

    async def authorization_url(self, state: str, nonce: str, verifier: str, prompt: str | None) -> str:
        meta = await self.metadata()
        extra = {"prompt": prompt} if prompt else {}
        async with self._client() as client:
            url, _state = client.create_authorization_url(
                meta["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier, **extra)
        return str(url)

    async def claims(self, code: str, verifier: str, nonce: str) -> dict[str, Any]:
        """The code exchanged and the ID token checked; its claims with the userinfo ones added."""
        meta = await self.metadata()
        async with self._client() as client:
            token = await client.fetch_token(meta["token_endpoint"], code=code, code_verifier=verifier)
            keys = KeySet.import_key_set((await client.get(meta["jwks_uri"])).json())
            decoded = jwt.decode(token["id_token"], keys, algorithms=ID_TOKEN_ALGORITHMS)
            jwt.JWTClaimsRegistry(
                leeway=LEEWAY_S, exp={"essential": True}, sub={"essential": True},
                iss={"essential": True, "value": meta.get("issuer", self._oidc.issuer)},
                aud={"essential": True, "value": self._oidc.client_id}, nonce={"essential": True, "value": nonce},
            ).validate(decoded.claims)
            found = dict(decoded.claims)
            if meta.get("userinfo_endpoint"):
                reply = await client.get(meta["userinfo_endpoint"])
                if reply.status_code == 200 and reply.json().get("sub") == found.get("sub"):
                    found = {**reply.json(), **found}
        return found


def oidc_router(auth: Authenticator, page: Page) -> APIRouter | None:
    """The sign-in routes, or None when `[console.auth.oidc]` is not configured."""
    oidc, signer = auth.settings.oidc, auth.signer
    if oidc is None or signer is None:
        return None
    client = OidcClient(oidc)
    secure = oidc.redirect_url.startswith("https://")
    ttl = auth.settings.session_ttl_s
    router = APIRouter(include_in_schema=False)  # mounted under /console by the pages router

    async def login(next: str = "/console/", prompt: str = "") -> Response:
        state, nonce, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        try:
            url = await client.authorization_url(state, nonce, verifier, "login" if prompt == "login" else None)
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            log.warning("console sign-in: the provider's discovery failed (%s)", type(exc).__name__)
            return page("message.html", {"title": "Sign-in unavailable",
                                         "message": "The identity provider cannot be reached; try again."}, 503)
        response = RedirectResponse(url, status_code=303)
        cookie = signer.sign({"kind": "login", "state": state, "nonce": nonce, "verifier": verifier,
                              "next": safe_next(next)}, LOGIN_TTL_S)
        set_cookie(response, LOGIN_COOKIE, cookie, LOGIN_TTL_S, secure=secure, strict=False)
        return response

    async def callback(request: Request, code: str = "", state: str = "") -> Response:
        pending = signer.check(request.cookies.get(LOGIN_COOKIE))
        if pending is None or pending.get("kind") != "login" or not code or \
                not hmac.compare_digest(state.encode(), str(pending.get("state", "")).encode()):
            return page("message.html", {"title": "Sign-in failed",
                                         "message": "The sign-in expired or did not start here; sign in again."}, 400)
        try:
            claims = await client.claims(code, str(pending["verifier"]), str(pending["nonce"]))
        except (httpx.HTTPError, AuthlibBaseError, JoseError, KeyError, ValueError) as exc:
            log.warning("console sign-in refused (%s)", type(exc).__name__)
            return page("message.html", {"title": "Sign-in failed",
                                         "message": "The provider's answer could not be verified."}, 400)
        response = page("moving.html", {"title": "Signed in", "next": str(pending["next"])}, 200)
        set_cookie(response, SESSION_COOKIE, _session(signer, oidc, auth, claims, ttl), ttl, secure=secure, strict=True)
        clear_cookie(response, LOGIN_COOKIE, secure=secure, strict=False)
        return response

    async def logout(request: Request) -> Response:
        current = auth.principal(request)
        csrf = _form_field(await request.body(), "csrf")
        if current.via == "session" and not hmac.compare_digest(csrf.encode(), (current.csrf or "").encode()):
            return page("message.html", {"title": "Not signed out", "message": "The page was stale; try again."}, 403)
        response = page("signed_out.html", {"title": "Signed out"}, 200)
        clear_cookie(response, SESSION_COOKIE, secure=secure, strict=True)
        return response

    router.add_api_route("/login", login, methods=["GET"])
    router.add_api_route("/auth/callback", callback, methods=["GET"])
    router.add_api_route("/logout", logout, methods=["POST"])
    return router


def _form_field(body: bytes, name: str) -> str:
    """One field of a small url-encoded form (the logout form); "" when absent or the body is too big."""
    if len(body) > FORM_MAX:
        return ""
    return urllib.parse.parse_qs(body.decode("utf-8", "replace")).get(name, [""])[0]


def _session(signer: Signer, oidc: OidcSettings, auth: Authenticator, claims: dict[str, Any], ttl: float) -> str:
    raw = claims.get(oidc.groups_claim) or []
    groups = [str(g) for g in raw] if isinstance(raw, list) else [str(raw)]
    role = roles.role_of_groups(groups, auth.settings.groups)
    name = str(claims.get(oidc.user_claim) or claims.get("sub") or "unknown")
    log.info("console sign-in: %s as %s", name[:200], role or "no role")
    return signer.sign({"kind": "session", "name": name[:200], "role": role, "csrf": new_csrf()}, ttl)
