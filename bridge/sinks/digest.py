"""Words shared by every sink's digest: what changed, when, which queues.

Plain text; each sink escapes it its own way. A digest says what changed
since the previous notification, so on-call can tell a growing storm from a
reminder at a glance (docs/design.md, section 5b).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from bridge.models import Alert, Notification


def when(ts: float) -> str:
    """`2026-11-30 17:02:10 UTC`."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ts: float | None) -> str | None:
    """RFC 3339 with milliseconds, for machine readers."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def span(seconds: float) -> str:
    """`45 s`, `12 min`, `4 h 10 min`."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def jobs_word(count: int) -> str:
    return f"{count:,} job" + ("" if count == 1 else "s")


def change_line(n: Notification) -> str:
    """The headline of what changed since the previous notification."""
    if n.kind == "repeat":
        return (
            f"No new dead letters since {when(n.last_seen)}; {n.count:,} in all. "
            "Reminder only: this group closes now, the next dead letter of this cause opens a new one."
        )
    if n.sequence > 1 and n.previous_at is not None:
        return f"{n.new_count:,} more since {when(n.previous_at)}, {n.count:,} in all."
    where = {"fp": "with the same cause", "queue": "in this queue"}.get(n.group_key.partition(":")[0], "")
    return f"{jobs_word(n.count)} failed {where} within {span(n.last_seen - n.first_seen)}.".replace("  ", " ")


def queues_line(
    n: Notification,
    limit: int = 10,
    name_chars: int = 100,
    escape: Callable[[str], str] = str,
    budget: int = 900,
) -> str:
    """`orders ×2,990 · billing ×10` (most jobs first), at most `limit` names and `budget`
    chars (as escaped by `escape`), then `+N more queues`."""
    parts: list[str] = []
    used = 0
    for q in n.queues[:limit]:
        part = escape(f"{q[:name_chars]} ×{n.queue_counts.get(q, 0):,}")
        if parts and used + len(part) + 3 > budget:
            break
        parts.append(part)
        used += len(part) + 3
    if len(n.queues) > len(parts):
        parts.append(f"+{len(n.queues) - len(parts):,} more queues")
    return " · ".join(parts) if parts else "—"


def group_label(n: Notification) -> str:
    """`fingerprint 3f2a…`, `queue orders`, `job …` from the group key."""
    kind, _, value = n.group_key.partition(":")
    names = {"fp": "fingerprint", "queue": "queue", "job": "job"}
    return f"{names.get(kind, kind)} {value}"


def title(n: Notification) -> str:
    """`Digest #2`, `Reminder #3`."""
    return f"{'Reminder' if n.kind == 'repeat' else 'Digest'} #{n.sequence}"


SOURCE_NAMES = {"openclaw": "OpenClaw", "cache": "OpenClaw (cached)", "fallback": "static fallback"}


def summary_source(alert: Alert) -> str:
    """`Summary: OpenClaw (cached)`, `Summary: static fallback (timeout)`: who wrote the summary."""
    summary = alert.summary
    text = f"Summary: {SOURCE_NAMES.get(summary.source.value, summary.source.value)}"
    return text + (f" ({summary.fallback_reason[:100]})" if summary.fallback_reason else "")
