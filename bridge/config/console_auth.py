"""`[console.auth]`: roles, role tokens, OpenID Connect sign-in, trusted proxy (docs/design.md, "Console roles").

Referenced from `ConsoleSettings` by one field (`auth`). A role token is
stored only as its SHA-256 (`dlq-bridge console-token` prints a new token and
the line to paste); several per role may be listed, so a token is rotated by
adding the new hash and removing the old one.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bridge.config.secrets import OptionalSecret, secret_env, secret_file

Role = Literal["viewer", "operator", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "operator", "admin")  # each may do what the ones before it may


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleToken(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9._@-]{1,64}$", description="Who uses the token (the audit list's `who`).")
    role: Role = Field(description="`viewer`, `operator` or `admin`.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="Hex SHA-256 of the token (never the token).")


class OidcSettings(_Model):
    issuer: str = Field(description="The issuer URL (discovery: `<issuer>/.well-known/openid-configuration`).")
    client_id: str = Field(min_length=1, description="This console's client id at the provider.")
    client_secret: OptionalSecret = Field(default=None, description="Client secret inline (none: public client).")
    client_secret_env: str | None = secret_env("the client secret")
    client_secret_file: Path | None = secret_file("the client secret")
    redirect_url: str = Field(description="`https://<console>/console/auth/callback`, as registered.")
    scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "groups"], description="Scopes asked for.")
    groups_claim: str = Field(default="groups", description="The ID-token or userinfo claim listing the user's groups.")
    user_claim: str = Field(default="preferred_username", description="The claim shown as `who` (else `sub`).")


class ProxySettings(_Model):
    addresses: list[str] = Field(
        description="Addresses or networks of the proxies (oauth2-proxy, …) whose identity headers are believed."
    )
    user_header: str = Field(default="X-Forwarded-User", description="Header naming the user.")
    groups_header: str = Field(default="X-Forwarded-Groups", description="Header listing the groups, comma separated.")

    @field_validator("addresses")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value


class ConsoleAuthSettings(_Model):
    """Who may do what on the console. Without any of it, the single `[console] token` is an admin token."""

    anonymous: Literal["viewer", "none"] = Field(
        default="viewer",
        description="What a request without credentials may do: `viewer` (read, as before roles) or `none`.",
    )
    tokens: list[RoleToken] = Field(default_factory=list, description="Role tokens, each stored as its SHA-256.")
    groups: dict[Role, list[str]] = Field(
        default_factory=dict,
        description="Provider or proxy groups per role, e.g. `{operator = [\"sre\"], admin = [\"sre-leads\"]}`.",
    )
    oidc: OidcSettings | None = Field(default=None, description="Sign-in with OpenID Connect (code + PKCE).")
    proxy: ProxySettings | None = Field(default=None, description="Trusted-proxy mode: identity from proxy headers.")
    session_secret: OptionalSecret = Field(
        default=None, description="Key signing session cookies and CSRF tokens inline (prefer `_env` / `_file`)."
    )
    session_secret_env: str | None = secret_env("the session-signing key (32 bytes or more)")
    session_secret_file: Path | None = secret_file("the session-signing key")
    session_ttl_s: float = Field(default=8 * 3600, gt=0, le=7 * 86400, description="Session cookie lifetime.")

    @model_validator(mode="after")
    def _secret_for_sessions(self) -> ConsoleAuthSettings:
        wants = self.oidc is not None or self.proxy is not None
        if wants and (self.session_secret is None or len(self.session_secret.get_secret_value()) < 32):
            raise ValueError("console.auth: oidc and proxy need session_secret (32 characters or more)")
        return self
