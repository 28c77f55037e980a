"""Mapping HTTP responses and transport errors to SinkRetryable / SinkPermanent.

Retryable: 408, 425, 429, 5xx, timeouts and connection errors. Everything
else that is not 2xx is permanent (400, 401, 403, 404, 410, 3xx, ...).
Messages name the sink and the status, never the URL or a key: transport
errors are described by their class name only, and any response snippet has
the sink's secrets scrubbed out.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from bridge.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.http import parse_retry_after

RETRYABLE_STATUS = frozenset({408, 425, 429})
SNIPPET_CHARS = 200


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def scrub(text: str, secrets: Sequence[str]) -> str:
    """Replace every secret in `text` by `[REDACTED]`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return text


def check_response(
    sink: str, response: httpx.Response, key: str, secrets: Sequence[str] = ()
) -> None:
    """Return on 2xx; raise SinkRetryable/SinkPermanent otherwise."""
    status = response.status_code
    if 200 <= status <= 299:
        return
    snippet = scrub(response.text[:SNIPPET_CHARS], secrets).strip()
    message = f"HTTP {status}" + (f": {snippet}" if snippet else "")
    if is_retryable_status(status):
        retry_after = parse_retry_after(response.headers.get("retry-after"))
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
    """The sink error for an exception raised while sending (class names only, no URL)."""
    name = type(exc).__name__
    if exc.__cause__ is not None:  # e.g. the aiohttp error a transport mapped to httpx's
        name += f"/{type(exc.__cause__).__name__}"
    if isinstance(exc, _RETRYABLE_TRANSPORT):
        return SinkRetryable(sink, f"{name} (no response)", idempotency_key=key)
    return SinkPermanent(sink, name, idempotency_key=key)


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
