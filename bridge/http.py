"""The one shared httpx.AsyncClient, with a pluggable transport (DESIGN section 8)."""

from __future__ import annotations

import logging

import httpx

from bridge.settings import HttpSettings

USER_AGENT = "dlq-bridge/0.1"


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
