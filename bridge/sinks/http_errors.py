"""Mapping HTTP responses and transport errors to SinkRetryable / SinkPermanent.

Retryable: 408, 425, 429, 5xx, timeouts and connection errors. Everything
else that is not 2xx is permanent (400, 401, 403, 404, 410, 3xx, ...).
Messages name the sink and the status, never the URL or a key: transport
errors are described by what went wrong and a class name only (`connection refused
(ConnectionRefusedError)`, bridge.clients.net_errors), and any response snippet has
the sink's secrets scrubbed out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from urllib.parse import quote, quote_plus, urlsplit

import httpx

from bridge.clients.http import parse_retry_after
from bridge.clients.net_errors import describe_transport_error
from bridge.core.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.core.untrusted import escape_controls
from bridge.intake.redact import redact_text

RETRYABLE_STATUS = frozenset({408, 425, 429})
SNIPPET_CHARS = 200
SCRUB_CHARS = 64 * 1024
MIN_SECRET_PART = 8


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def _parts(secret: str) -> Iterator[str]:
    """The secret, and for a URL its path and its long path segments (the token of a Slack URL)."""
    yield secret
    if "://" in secret:
        path = urlsplit(secret).path
        yield path
        yield from (segment for segment in path.split("/") if len(segment) >= MIN_SECRET_PART)


def _encodings(part: str) -> Iterator[str]:
    """`part` as it may appear in a response: raw, JSON-escaped, %-encoded (either case)."""
    yield part
    yield part.replace("/", "\\/")
    yield part.replace("/", "\\u002f")
    yield quote(part, safe="")
    yield quote(part)
    yield quote_plus(part)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """Replace every secret in `text` by `[REDACTED]`, in every encoding a server may echo it in."""
    variants = {v for secret in secrets if secret for part in _parts(secret) for v in _encodings(part) if v}
    for variant in sorted(variants, key=len, reverse=True):  # longest first: the URL before its path
        text = re.sub(re.escape(variant), "[REDACTED]", text, flags=re.IGNORECASE)
    return text


def snippet_of(text: str, secrets: Sequence[str]) -> str:
    """A short, safe excerpt of a response body: scrubbed and redacted first, then cut, controls escaped."""
    cleaned = redact_text(scrub(text[:SCRUB_CHARS], secrets))
    return escape_controls(cleaned[:SNIPPET_CHARS]).strip()


def check_response(
    sink: str, response: httpx.Response, key: str, secrets: Sequence[str] = ()
) -> None:
    """Return on 2xx; raise SinkRetryable/SinkPermanent otherwise."""
    status = response.status_code
    if 200 <= status <= 299:
        return
    snippet = snippet_of(response.text, secrets)
    message = f"HTTP {status}" + (f": {snippet}" if snippet else "")
    if is_retryable_status(status):
        # uncapped here: the retry policy and the fleet-wide hold cut it to `delivery.max_retry_after_s`
        retry_after = parse_retry_after(response.headers.get("retry-after"), cap_s=math.inf)
        raise SinkRetryable(
            sink, message, status=status, retry_after_s=retry_after, idempotency_key=key
        )
    raise SinkPermanent(sink, message, status=status, idempotency_key=key)


_RETRYABLE_TRANSPORT = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
    TimeoutError,
    OSError,
)


def transport_error(sink: str, exc: Exception, key: str) -> SinkError:
    """The sink error for an exception raised while sending: what went wrong, told apart (refused, reset,
    DNS, TLS, timeout: bridge.clients.net_errors), and the class that says so; never a URL."""
    detail = describe_transport_error(exc)
    if isinstance(exc, _RETRYABLE_TRANSPORT):
        return SinkRetryable(sink, detail, idempotency_key=key)
    return SinkPermanent(sink, detail, idempotency_key=key)


async def post(
    http: httpx.AsyncClient,
    sink: str,
    key: str,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    timeout_s: float,
    secrets: Sequence[str] = (),
) -> httpx.Response:
    """POST once; map failures to sink errors; return the 2xx response."""
    try:
        response = await http.post(url, content=content, headers=headers, timeout=timeout_s)
    except (httpx.HTTPError, TimeoutError, OSError) as exc:
        raise transport_error(sink, exc, key) from None
    check_response(sink, response, key, secrets)
    return response
