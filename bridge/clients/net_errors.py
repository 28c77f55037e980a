"""What went wrong on the way to a receiver, in words a person acts on (docs/design.md, section 5).

    transport_label(exc) -> "connection refused" | "connection reset" | "DNS failure" | "TLS failure"
                            | "timeout" | "cannot connect" | "network error"

Transports wrap the socket's error differently: httpx over anyio raises `ConnectError("All connection
attempts failed")` from a group of OSErrors; the aiohttp transport reports a refused connection as
`ConnectTimeout` caused by `ClientConnectorError` (which carries the OSError as `os_error`). The
label is read from the whole chain (causes, contexts, groups, `os_error`), the most specific cause
first, so a refused connection is never called a timeout. Logs, the console, `undeliverable list`
and `check` all say it through `describe_transport_error`.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator

REFUSED, RESET, DNS, TLS, TIMEOUT, CONNECT, OTHER = (
    "connection refused", "connection reset", "DNS failure", "TLS failure", "timeout", "cannot connect",
    "network error",
)
_CONNECT_NAMES = frozenset({"ConnectError", "ClientConnectorError", "ClientConnectionError", "SMTPConnectError"})
_RESET_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})
_RESET_NAMES = frozenset({"ServerDisconnectedError", "RemoteProtocolError", "ReadError", "WriteError",
                          "ClientOSError", "IncompleteRead", "SMTPServerDisconnected"})
_DNS_NAMES = frozenset({"ClientConnectorDNSError"})
_TLS_NAMES = frozenset({"ClientSSLError", "ClientConnectorSSLError", "ClientConnectorCertificateError",
                        "ServerFingerprintMismatch"})
_TIMEOUT_NAMES = frozenset({"ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
                            "ServerTimeoutError", "ConnectionTimeoutError", "SocketTimeoutError",
                            "SMTPTimeoutError", "SMTPConnectTimeoutError", "SMTPReadTimeoutError"})
CHAIN_MAX = 32


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and everything behind it: causes, contexts, the members of exception groups, `os_error`."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < CHAIN_MAX:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [e for e in (current.__cause__, current.__context__, getattr(current, "os_error", None))
                 if isinstance(e, BaseException)]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)


def _specific(exc: BaseException) -> str | None:
    """The label one exception alone gives, when it is specific (not a bare timeout)."""
    name = type(exc).__name__
    if isinstance(exc, ssl.SSLError) or name in _TLS_NAMES:
        return TLS
    if isinstance(exc, socket.gaierror) or name in _DNS_NAMES:
        return DNS
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return REFUSED
    if isinstance(exc, ConnectionResetError | BrokenPipeError) or getattr(exc, "errno", None) in _RESET_ERRNOS:
        return RESET
    return None


def transport_label(exc: BaseException) -> str:
    """One of the labels above for an exception raised while connecting, sending or reading."""
    return _classify(exc)[0]


def _classify(exc: BaseException) -> tuple[str, BaseException]:
    """(label, the exception in the chain that says so)."""
    found = list(chain(exc))
    specific = [(label, item) for item in found if (label := _specific(item)) is not None]
    if specific:  # the deepest saying the first label: the socket's own error, whatever the transport wrapped
        label = specific[0][0]
        return label, [item for said, item in specific if said == label][-1]
    for names, label in ((_TIMEOUT_NAMES, TIMEOUT), (_CONNECT_NAMES, CONNECT), (_RESET_NAMES, RESET)):
        for item in found:
            if type(item).__name__ in names or (label == TIMEOUT and isinstance(item, TimeoutError)):
                return label, item
    return OTHER, exc


def describe_transport_error(exc: BaseException) -> str:
    """`connection refused (ConnectionRefusedError)`: the label, then the class in the chain that tells it
    (never a URL or a message, which may hold one)."""
    label, item = _classify(exc)
    return f"{label} ({type(item).__name__})"
