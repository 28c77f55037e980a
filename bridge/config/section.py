"""What every configuration section shares: frozen, no unknown keys, secrets checked, URL shapes."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict, model_validator

from bridge.config.secrets import missing_secrets

NAME_RE = r"^[A-Za-z0-9._-]+$"


class Section(BaseModel):
    """A configuration table: frozen, unknown keys refused, every required secret given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _secrets_given(self) -> Section:
        missing = missing_secrets(self)
        if missing:
            raise ValueError("; ".join(f"{self._owner()}{m}" for m in missing))
        return self

    def _owner(self) -> str:
        return ""


def check_http_url(value: str, what: str) -> str:
    """`value` when it is an http(s) URL with a host and a valid port; ValueError naming `what`."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL with a host")
    check_port(parts, what)
    return value.rstrip("/") if what == "openclaw.url" else value


def check_port(parts: SplitResult, what: str) -> None:
    """ValueError naming `what` when the URL's port is not a number from 1 to 65535."""
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{what} has a bad port (a number from 1 to 65535)")
