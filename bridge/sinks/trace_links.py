"""A job's trace where people click: the fields and lines every sink shows (docs/tracing.md).

The link is `[tracing] trace_url` with the job's validated trace id (`TracingSettings.trace_link`,
set on the alert when it is made); without the setting the trace id is shown as text. A group
notification lists the traces of the jobs it lists (the first `LISTED_MAX` for people) and says
whose trace its own link is: the group's first job's.
"""

from __future__ import annotations

from typing import Any

from bridge.core.models import Alert, GroupJob, Notification
from bridge.core.trace_context import TraceLink

LISTED_MAX = 10
"""Job traces a card, page or email of a group lists (webhooks list every job they carry)."""


def fields(alert: Alert) -> dict[str, Any]:
    """`traceparent`, `trace_id`, `trace_url` of a machine-read body (nulls without trace context)."""
    link = alert.trace_link
    return {
        "traceparent": alert.dead_letter.traceparent if link else None,
        "trace_id": link.trace_id if link else None,
        "trace_url": link.url if link else None,
    }


def job_fields(job: GroupJob) -> dict[str, Any]:
    """A listed job's `traceparent`, `trace_id` and `trace_url` (checked, as `fields`)."""
    link = job.trace_link
    return {
        "traceparent": job.traceparent if link else None,
        "trace_id": link.trace_id if link else None,
        "trace_url": link.url if link else None,
    }


def group_fields(n: Notification) -> dict[str, Any]:
    """The group's own trace (its first job's) and which job that is."""
    own = fields(n.first)
    return {**own, "trace_job_id": n.first.dead_letter.job_id if own["trace_id"] else None}


def listed(n: Notification, limit: int = LISTED_MAX) -> list[tuple[str, TraceLink]]:
    """(job id, trace) of the first `limit` listed jobs that carry trace context."""
    found: list[tuple[str, TraceLink]] = []
    for job in n.jobs:
        link = job.trace_link
        if link is not None:
            found.append((job.job_id, link))
        if len(found) >= limit:
            break
    return found


def own_note(n: Notification) -> str | None:
    """`the trace of job <id>, the group's first`: says whose trace a group's own link is."""
    if n.first.trace_link is None:
        return None
    return f"the trace of job {n.first.dead_letter.job_id}, the group's first"
