"""Showing URLs to humans and logs without their secrets."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MASK = "****"


def mask_url(url: str, *, keep_path: bool = False) -> str:
    """`scheme://host[:port]` plus the path only when asked; passwords and queries never."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    if parts.username or parts.password:
        netloc = f"{parts.username or ''}:{MASK}@{netloc}" if parts.password else f"{MASK}@{netloc}"
    path = parts.path if keep_path else ("/" + MASK if parts.path.strip("/") else "")
    return urlunsplit((parts.scheme, netloc, path, "", ""))
