"""Email sink: one mail per alert, or per group digest, through an SMTP relay (docs/sinks.md, Email).

The message is built by `bridge.sinks.email.message` and sent with aiosmtplib (both imported by the
first mail: a bridge with no email sink never loads them, about 1 MB) over STARTTLS
(`security = "starttls"`, port 587), implicit TLS (`"tls"`, port 465) or, for a relay on the same
host only, plain SMTP (`"none"`). Replies map to the delivery outcomes:

    4xx (and a dropped or timed-out connection)  SinkRetryable: the relay asked to try later
    5xx (a refused sender, all recipients refused, bad auth, a rejected message)  SinkPermanent

A mail some recipients took and some refused counts as sent (a resend would duplicate it to the
ones that took it); the refused ones are logged. The password is a secret: it is given to aiosmtplib
only, never logged, and scrubbed from any server reply put in an error.
"""

from __future__ import annotations

import base64
import logging
import ssl
from collections.abc import Sequence
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator

from bridge.clients.net_errors import describe_transport_error
from bridge.config.secrets import OptionalSecret, secret_env, secret_file
from bridge.core.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.core.models import Alert, Notification
from bridge.sinks.http_errors import snippet_of
from bridge.sinks.sink_plugin import SinkContext, SinkPlugin
from bridge.sinks.sink_settings import GroupBy, SinkSettingsBase

log = logging.getLogger(__name__)

Security = Literal["starttls", "tls", "none"]


def _dropped() -> tuple[type[BaseException], ...]:
    """Errors of a dropped or timed-out connection (retryable)."""
    import aiosmtplib

    return (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPConnectError, aiosmtplib.SMTPTimeoutError,
            OSError, TimeoutError)


class EmailSinkSettings(SinkSettingsBase):
    type: Literal["email"] = Field(description="Sink type.")
    host: str = Field(min_length=1, description="SMTP relay host.")
    port: int | None = Field(default=None, ge=1, le=65535, description="SMTP port (default: 587, or 465 with `tls`).")
    security: Security = Field(
        default="starttls", description="`starttls` (required, not opportunistic), `tls` (implicit) or `none`."
    )
    ca_file: Path | None = Field(default=None, description="CA bundle to trust for the relay (default: the system's).")
    username: str | None = Field(default=None, description="SMTP AUTH user (with `password`).")
    password: OptionalSecret = Field(default=None, description="SMTP AUTH password, a secret: prefer `password_env`.")
    password_env: str | None = secret_env("the SMTP password")
    password_file: Path | None = secret_file("the SMTP password")
    from_address: str = Field(min_length=3, description="The `From` address, e.g. `dlq-bridge <dlq@example.com>`.")
    to: list[str] = Field(min_length=1, description="Recipient addresses.")
    group_by: GroupBy = Field(
        default="fingerprint",
        description="How alerts are grouped (a mail per group): `cause`, `fingerprint`, `queue`, `none`",
    )

    @model_validator(mode="after")
    def _auth_pair(self) -> EmailSinkSettings:
        if (self.username is None) != (self.password is None):
            raise ValueError(f"sink {self.name}: SMTP AUTH needs both username and password")
        if self.password is not None and self.security == "none":
            raise ValueError(f"sink {self.name}: a password is never sent without TLS (security = \"none\")")
        return self

    def effective_port(self) -> int:
        return self.port or (465 if self.security == "tls" else 587)


def _secret_forms(password: str, username: str | None) -> list[str]:
    """The password as it could be echoed: raw, and inside base64 AUTH PLAIN / LOGIN strings."""
    forms = [password, base64.b64encode(password.encode()).decode()]
    if username is not None:
        forms.append(base64.b64encode(f"\0{username}\0{password}".encode()).decode())
    return forms


def smtp_error(sink: str, exc: Exception, key: str, secrets: Sequence[str]) -> SinkError:
    """The sink error for a failed send: 4xx retryable, 5xx permanent, dropped connections retryable."""
    import aiosmtplib

    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = sorted({r.code for r in exc.recipients})
        detail = f"SMTP {'/'.join(map(str, codes))}: all recipients refused"
        retry = all(400 <= c < 500 for c in codes)
        return (SinkRetryable if retry else SinkPermanent)(sink, detail, idempotency_key=key)
    if isinstance(exc, aiosmtplib.SMTPResponseException) and exc.code > 0:
        snippet = snippet_of(exc.message, secrets)
        detail = f"SMTP {exc.code}" + (f": {snippet}" if snippet else "")
        retry = 400 <= exc.code < 500
        return (SinkRetryable if retry else SinkPermanent)(sink, detail, idempotency_key=key)
    if isinstance(exc, _dropped()):
        return SinkRetryable(sink, describe_transport_error(exc), idempotency_key=key)
    said = snippet_of(str(exc), secrets)  # e.g. "SMTP STARTTLS extension not supported by server."
    return SinkPermanent(sink, type(exc).__name__ + (f": {said}" if said else ""), idempotency_key=key)


class EmailSink:
    """Sends each mail once per attempt through one relay."""

    type = "email"

    def __init__(self, settings: EmailSinkSettings, timeout_s: float = 10.0) -> None:
        self.name = settings.name
        self._settings = settings
        self._timeout_s = timeout_s
        self._tls: ssl.SSLContext | None = None

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            ca = self._settings.ca_file
            self._tls = ssl.create_default_context(cafile=str(ca) if ca else None)
        return self._tls

    def _connection(self) -> dict[str, Any]:
        """Where and how to connect: STARTTLS is required (never opportunistic) unless `security = "none"`."""
        s = self._settings
        return {
            "hostname": s.host, "port": s.effective_port(), "timeout": self._timeout_s,
            "use_tls": s.security == "tls", "start_tls": s.security == "starttls",
            "tls_context": self._context() if s.security != "none" else None,
        }

    def _password(self) -> SecretStr | None:
        return self._settings.password

    def render(self, alert: Alert) -> dict[str, Any]:
        from bridge.sinks.email import message as mail_render  # on first use: it compiles jinja templates

        return _as_dict(mail_render.alert_message(alert, self._settings.from_address, self._settings.to))

    def render_group(self, notification: Notification) -> dict[str, Any]:
        from bridge.sinks.email import message as mail_render

        s = self._settings
        return _as_dict(mail_render.group_message(notification, s.from_address, s.to))

    async def send(self, alert: Alert) -> None:
        from bridge.sinks.email import message as mail_render

        s = self._settings
        await self._send(mail_render.alert_message(alert, s.from_address, s.to), alert.idempotency_key)

    async def send_group(self, notification: Notification) -> None:
        from bridge.sinks.email import message as mail_render

        s = self._settings
        await self._send(mail_render.group_message(notification, s.from_address, s.to), notification.ledger_key)

    async def _send(self, message: EmailMessage, key: str) -> None:
        message["Date"] = format_datetime(datetime.now(UTC))  # of this attempt; the rest is the same each time
        s, password = self._settings, self._password()
        secret = password.get_secret_value() if password is not None else None
        secrets = _secret_forms(secret, s.username) if secret else []
        import aiosmtplib

        try:
            refused, _reply = await aiosmtplib.send(
                message, username=s.username, password=secret, **self._connection()
            )
        except Exception as exc:  # every aiosmtplib and socket error is mapped, none is re-raised as is
            raise smtp_error(self.name, exc, key, secrets) from None
        if refused:
            log.warning("sink %s: %s sent, but %d recipient(s) refused it: %s", self.name, key, len(refused),
                        ", ".join(f"{r} ({reply.code})" for r, reply in refused.items()))

    async def probe(self) -> str:
        """Connect, EHLO, STARTTLS and log in, then QUIT without sending (`check`); the server's banner."""
        import aiosmtplib

        from bridge.sinks.email import message as mail_render

        s, password = self._settings, self._password()
        client = aiosmtplib.SMTP(**self._connection())
        try:
            reply = await client.connect()
            if s.username is not None and password is not None:
                await client.login(s.username, password.get_secret_value())
            await client.quit()
        except Exception as exc:
            secrets = _secret_forms(password.get_secret_value(), s.username) if password else []
            raise smtp_error(self.name, exc, "check", secrets) from None
        return mail_render.one_line(reply.message, 120)


def _as_dict(message: EmailMessage) -> dict[str, Any]:
    """A mail as `summarize --dry-run` shows it: its headers and both parts."""
    parts = {part.get_content_type(): part.get_content() for part in message.iter_parts()}
    return {"headers": dict(message.items()), "text": parts.get("text/plain", ""), "html": parts.get("text/html", "")}


async def _probe(settings: EmailSinkSettings, ctx: SinkContext) -> str:
    return await EmailSink(settings, ctx.timeout_s).probe()


def as_text(body: dict[str, Any]) -> str | None:
    """A rendered mail as a dry run shows it: its subject, then the plain-text part."""
    headers, text = body.get("headers"), body.get("text")
    if not isinstance(headers, dict) or not isinstance(text, str):
        return None
    return f"Subject: {headers.get('Subject', '')}\nMessage-ID: {headers.get('Message-ID', '')}\n\n{text}"


PLUGIN = SinkPlugin(
    settings=EmailSinkSettings,
    build=lambda s, ctx: EmailSink(s, ctx.timeout_s),
    probe=_probe,
    as_text=as_text,
)
