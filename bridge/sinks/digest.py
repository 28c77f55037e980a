"""Words shared by every sink's digest: what changed, when, which queues.

Plain text; each sink escapes it its own way. A digest says what changed
since the previous notification, so on-call can tell a growing storm from a
reminder at a glance (docs/design.md, section 5b).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from bridge.core.models import Alert, Notification
from bridge.intake.cause import Cause, cause_of


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
    kind = n.group_key.partition(":")[0]
    across = f"with the same cause in {len(n.queues):,} queues" if len(n.queues) > 1 else "with the same cause"
    where = {"fp": "with the same cause", "queue": "in this queue", "cause": across}.get(kind, "")
    return f"{jobs_word(n.count)} failed {where} within {span(n.last_seen - n.first_seen)}.".replace("  ", " ")


def counts_line(
    counts: Mapping[str, int],
    noun: str,
    limit: int = 10,
    name_chars: int = 100,
    escape: Callable[[str], str] = str,
    budget: int = 900,
) -> str:
    """`orders ×2,990 · billing ×10` (most first), at most `limit` names and `budget` chars
    (as escaped by `escape`), then `and N more <noun>`."""
    names = sorted(counts, key=lambda name: (-counts[name], name))
    parts: list[str] = []
    used = 0
    for name in names[:limit]:
        part = escape(f"{(name or '(unnamed)')[:name_chars]} ×{counts[name]:,}")
        if parts and used + len(part) + 3 > budget:
            break
        parts.append(part)
        used += len(part) + 3
    if len(names) > len(parts):
        parts.append(f"and {len(names) - len(parts):,} more {noun}")
    return " · ".join(parts) if parts else "—"


def queues_line(
    n: Notification,
    limit: int = 10,
    name_chars: int = 100,
    escape: Callable[[str], str] = str,
    budget: int = 900,
) -> str:
    """`orders ×2,990 · billing ×10 · and 3 more queues`."""
    counts = n.queue_counts or dict.fromkeys(n.queues, 0)
    return counts_line(counts, "queues", limit, name_chars, escape, budget)


def jobs_line(n: Notification, limit: int = 10, escape: Callable[[str], str] = str, budget: int = 900) -> str:
    """`sync_inventory ×2,990 · reindex ×10`: the job names the group holds (first job's when unknown)."""
    counts = n.job_counts or {n.first.dead_letter.job_name or "": n.count}
    return counts_line(counts, "job names", limit, 100, escape, budget)


def kinds_line(n: Notification) -> str:
    """`list ×1,200 · sidekiq ×640`: the kinds of DLQ the group's jobs came from."""
    counts = n.kind_counts or {n.first.dead_letter.source_kind or "list": n.count}
    return counts_line(counts, "kinds", 10)


def queue_spans(n: Notification, limit: int = 10) -> list[str]:
    """`orders ×2,990, 08:00:01–08:01:15 UTC` per queue, most jobs first, then `and N more queues`."""
    lines = []
    for q in n.queues[:limit]:
        first, last = n.queue_first.get(q, n.first_seen), n.queue_last.get(q, n.last_seen)
        lines.append(f"{q[:100]} ×{n.queue_counts.get(q, 0):,}, {_clock(first)}–{_clock(last)} UTC")
    if len(n.queues) > limit:
        lines.append(f"and {len(n.queues) - limit:,} more queues")
    return lines


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def cause(n: Notification) -> Cause:
    """The cause of the group's first job (every job of a cause group has the same one)."""
    dl = n.first.dead_letter
    return cause_of(dl.last_error, dl.parse_error)


def cause_facts(n: Notification) -> dict[str, str | bool | None]:
    """A group's cause for machine readers (the webhook event, PagerDuty's custom_details)."""
    c = cause(n)
    return {"key": c.key, "label": c.label, "error_class": c.error_class, "template": c.template,
            "dependency": c.dependency or None, "outage": n.outage}


def group_label(n: Notification) -> str:
    """What the group is, in words: its cause, its queue or its job; never a bare hash."""
    kind, _, _ = n.group_key.partition(":")
    dl = n.first.dead_letter
    if kind == "cause":
        return f"cause: {cause(n).label}"
    if kind == "fp":
        return f"one failure of {dl.job_name or 'a job'} in queue {dl.queue}: {cause(n).label}"
    if kind == "queue":
        return f"every failure in queue {dl.queue}"
    return f"job {dl.job_id} in queue {dl.queue}"


def headline(n: Notification) -> str:
    """The card's title: an outage says what is down and how wide; else the first summary's title.

    Made from the cause, not the model, so a fallback summary's card says the same.
    """
    if n.outage:
        return f"{cause(n).label} — {len(n.queues):,} queues, {jobs_word(n.count)}"
    return n.first.summary.title


def facts(n: Notification, escape: Callable[[str], str] = str, budget: int = 900) -> list[tuple[str, str]]:
    """The label/value pairs every sink's digest shows (Teams and email renderers call this too)."""
    pairs = [
        ("Group", group_label(n)),
        ("Job names", jobs_line(n, escape=escape, budget=budget)),
        ("Queues", queues_line(n, escape=escape, budget=budget)),
        ("Kinds", kinds_line(n)),
    ]
    if n.by_cause and (dependency := cause(n).dependency):
        pairs.insert(1, ("Dependency", dependency))
    return pairs


def title(n: Notification) -> str:
    """`Digest #2`, `Reminder #3`."""
    return f"{'Reminder' if n.kind == 'repeat' else 'Digest'} #{n.sequence}"


SOURCE_NAMES = {"openclaw": "OpenClaw", "cache": "OpenClaw (cached)", "fallback": "static fallback"}


def summary_source(alert: Alert) -> str:
    """`Summary: OpenClaw (cached)`, `Summary: static fallback (timeout)`: who wrote the summary."""
    summary = alert.summary
    text = f"Summary: {SOURCE_NAMES.get(summary.source.value, summary.source.value)}"
    return text + (f" ({summary.fallback_text})" if summary.fallback_reason else "")
