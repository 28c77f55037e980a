"""The one shared httpx.AsyncClient, with a pluggable transport (docs/design.md, section 8)."""

from __future__ import annotations

import logging
import math
import time
from datetime import UTC
from email.utils import parsedate_to_datetime

import httpx

from bridge.config.sections import HttpSettings

USER_AGENT = "dlq-bridge/0.1"
MAX_RETRY_AFTER_S = 300.0


def build_transport(settings: HttpSettings) -> httpx.AsyncBaseTransport:
    limits = httpx.Limits(
        max_connections=settings.max_connections,
        max_keepalive_connections=settings.max_connections,
    )
    if settings.transport == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        transport: httpx.AsyncBaseTransport = AiohttpTransport(limits=limits, trust_env=False)
        return transport
    return httpx.AsyncHTTPTransport(limits=limits, trust_env=False)


def build_http_client(settings: HttpSettings, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """Build the client every outbound call shares; tests pass their own transport."""
    # httpx logs every request URL at INFO; a Slack webhook URL is a secret.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return httpx.AsyncClient(
        transport=transport or build_transport(settings),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,
        timeout=httpx.Timeout(10.0),
    )


def parse_retry_after(
    value: str | None, now: float | None = None, cap_s: float = MAX_RETRY_AFTER_S
) -> float | None:
    """Seconds to wait from a Retry-After header; None when absent or unreadable.

    Delta-seconds or an HTTP date (a date without a zone is taken as UTC), never
    below 0 and never above `cap_s` (`inf` for the caller to cut: sinks cut to
    `delivery.max_retry_after_s`); "nan" is unreadable. Sinks and the OpenClaw
    client share it.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), cap_s)
