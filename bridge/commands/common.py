"""Helpers the operator commands share: a Redis connection, masking, tables."""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import shutil
from collections.abc import AsyncIterator, Iterator, Sequence

import redis.asyncio as redis

from bridge.clients.embedded import EmbeddedRedis
from bridge.clients.redis_client import build_redis
from bridge.core import names
from bridge.core.exit_codes import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from bridge.core.urls import MASK, mask_url
from bridge.settings import Settings
from bridge.stores.archive import Archive

SUGGEST_SCAN_MAX = 10_000

# The commands import these from here.
__all__ = ["EXIT_FAILED", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "MASK", "mask_url"]


def redis_target(settings: Settings) -> str:
    """Where Redis is, for humans: the URL with its password masked, or `embedded`."""
    if settings.redis.url is None:
        return f"embedded (127.0.0.1:{settings.redis.embedded_port})"
    return mask_url(settings.redis.url.get_secret_value(), keep_path=True)


def redis_error(command: str, settings: Settings, exc: BaseException) -> str:
    """The one line every command prints when the bridge's Redis fails: which Redis, and what it said
    (the URL's password masked)."""
    text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    if settings.redis.url is not None:
        text = text.replace(settings.redis.url.get_secret_value(), redis_target(settings))
    return f"{command}: Redis error at {redis_target(settings)}: {text}"


@contextlib.contextmanager
def hold_embedded(settings: Settings) -> Iterator[None]:
    """The embedded server (when no URL is configured) kept up around a command that opens Redis more
    than once (`check`): it starts once, every `open_redis` inside reuses it, it stops at the end."""
    if settings.redis.url is not None:
        yield
        return
    embedded = EmbeddedRedis(settings.redis.data_dir, settings.redis.embedded_port)
    embedded.start()
    try:
        yield
    finally:
        embedded.stop()


@contextlib.asynccontextmanager
async def open_redis(settings: Settings) -> AsyncIterator[redis.Redis]:
    """A client on the configured Redis (or the embedded one, started if needed)."""
    with contextlib.ExitStack() as stack:
        if settings.redis.url is not None:
            url = settings.redis.url.get_secret_value()
        else:
            embedded = EmbeddedRedis(settings.redis.data_dir, settings.redis.embedded_port)
            url = embedded.start()
            stack.callback(embedded.stop)
        client = build_redis(url, settings.redis, max_connections=4)
        try:
            yield client
        finally:
            await client.aclose()


def resolve_source(name: str, match: str) -> str:
    """A DLQ key from what the operator typed: `orders` → `dead_letter:orders`.

    A name that already matches `sources.match` (e.g. `dead_letter:orders`, or
    `dlq:orders` under `match = "dlq:*"`) is taken as it is.
    """
    if name.startswith(names.DLQ_PREFIX) or fnmatch.fnmatchcase(name, match):
        return name
    return names.DLQ_PREFIX + name


async def close_queues(client: redis.Redis, dlq: str, match: str) -> list[str]:
    """The DLQs (waiting or drained: with an archive) whose names are closest to `dlq`, compared without
    the `dead_letter:` every name shares."""
    found = set(await Archive(client).archived_sources(SUGGEST_SCAN_MAX))
    async for key in client.scan_iter(match=match, count=1000, _type="list"):
        found.add(names.as_bytes(key).decode("utf-8", errors="replace"))
        if len(found) >= SUGGEST_SCAN_MAX:
            break
    bare = {name.removeprefix(names.DLQ_PREFIX): name for name in sorted(found)}
    close = difflib.get_close_matches(dlq.removeprefix(names.DLQ_PREFIX), list(bare), n=3)
    return [bare[name] for name in close]


def did_you_mean(close: Sequence[str]) -> str:
    return f" (did you mean {', '.join(close)}?)" if close else ""


def no_such_sink(unknown: Sequence[str], configured: Sequence[str]) -> str:
    """The one line for a `--sink` name that no configured sink has (exit 4)."""
    listed = ", ".join(configured) or "none"
    return f"no sink named {', '.join(unknown)} (configured: {listed})"


def plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table (no colours, so it pipes and greps well)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [_line(headers, widths), _line(["-" * w for w in widths], widths)]
    lines.extend(_line(row, widths) for row in rows)
    return "\n".join(lines)


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()


def one_line(text: str, width: int) -> str:
    """First line of `text`, cut to `width` characters with an ellipsis."""
    first = " ".join(text.strip().splitlines()[:1]) if text.strip() else ""
    return first if len(first) <= width else first[: max(width - 1, 0)] + "…"


def terminal_width(default: int = 120) -> int:
    return shutil.get_terminal_size((default, 24)).columns


