"""A real local SMTP server (aiosmtpd) with STARTTLS and AUTH, for the email sink tests.

Its certificate is self-signed, made by `openssl` for 127.0.0.1 in the test's temporary directory;
the sink trusts it through `ca_file`. Every accepted message is kept as the standard library's
`email` package parses it. `replies` scripts what DATA answers (e.g. "451 4.3.0 try later").
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

import pytest

from tests.support.redis_server import free_port

aiosmtpd_controller = pytest.importorskip("aiosmtpd.controller", reason="aiosmtpd (test extra)")
aiosmtpd_smtp = pytest.importorskip("aiosmtpd.smtp", reason="aiosmtpd (test extra)")


@dataclass
class Mailbox:
    """What the server accepted, and what it was told to answer."""

    user: str
    password: str
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)  # DATA replies, in order; then "250 OK"
    logins: list[str] = field(default_factory=list)
    port: int = 0
    ca_file: Path = Path()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.replies:
            return self.replies.pop(0)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.messages.append(cast(EmailMessage, message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
        ok = auth_data.login.decode() == self.user and auth_data.password.decode() == self.password
        if ok:
            self.logins.append(mechanism)
        return aiosmtpd_smtp.AuthResult(success=ok, handled=False)


def self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate for the STARTTLS test server")
    cert, key = tmp / "smtp-cert.pem", tmp / "smtp-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )
    return cert, key


@contextlib.contextmanager
def smtp_server(
    tmp: Path, user: str = "alerts", password: str = "smtp-pass-word-0451", *, starttls: bool = True
) -> Iterator[Mailbox]:
    """aiosmtpd on 127.0.0.1 that requires STARTTLS before AUTH and MAIL (`starttls=False`: a plain
    relay without STARTTLS or AUTH, as a misconfigured port looks)."""
    cert, key = self_signed(tmp)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Mailbox(user, password, port=free_port(), ca_file=cert)
    secured: dict[str, Any] = {
        "tls_context": context, "require_starttls": True, "authenticator": box.authenticate,
        "auth_require_tls": True, "auth_required": True,
    } if starttls else {}
    controller = aiosmtpd_controller.Controller(box, hostname="127.0.0.1", port=box.port, **secured)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
