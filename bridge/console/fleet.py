"""Fleet-wide state for the console: sinks (queues, health), the gateway gate, alert groups.

Read-only, through the same stores the workers use: `SinkQueue.stats`, the
groups' `GroupReader` (bridge.stores.groups), `read_gate` (bridge.stores.gateway_gate).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import redis.asyncio as redis
from pydantic import ValidationError

from bridge.console.views import (
    GatewayView,
    GroupMemberView,
    GroupSummaryView,
    GroupView,
    HealthState,
    SinkView,
    SummarySourceCounts,
    TokenDayView,
)
from bridge.core import names
from bridge.core.health import Health
from bridge.core.items import now_ms
from bridge.core.models import Alert, DeadLetter, GroupJob, Severity
from bridge.intake.cause import cause_of
from bridge.settings import OpenClawSettings, SinkSettings
from bridge.stores.gateway_gate import read_gate
from bridge.stores.groups import GroupReader
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.trends import TokenDay, TrendStore

GROUPS_MAX = 200
MEMBERS_MAX = 500
_BY_RANK = {s.rank: s for s in Severity}
_RANKING: dict[HealthState, int] = {"unknown": 0, "ok": 1, "degraded": 2, "failing": 3}


async def sink_views(
    client: redis.Redis, sinks: Sequence[SinkSettings], health: Health | None, undeliverable: Counter[str]
) -> list[SinkView]:
    at = now_ms()
    views = []
    for sink in sinks:
        stats = await SinkQueue(client, sink.name).stats()
        groups = await GroupReader(client, sink.name).open_count() if sink.group_by != "none" else 0
        state, detail = _health(health, sink.name)
        views.append(SinkView(name=sink.name, type=sink.type, health=state, health_detail=detail,
                              queue_depth=stats.depth, oldest_age_s=stats.oldest_age_s(at),
                              undeliverable=undeliverable.get(sink.name, 0), group_by=sink.group_by,
                              open_groups=groups))
    return views


def _health(health: Health | None, sink: str) -> tuple[HealthState, str]:
    """The worse of the sink's delivery check and its queue check."""
    if health is None:
        return "unknown", ""
    worst: tuple[HealthState, str] = ("unknown", "")
    for name in (f"sink:{sink}", f"sink_queue:{sink}"):
        check = health.get(name)
        if check is None:
            continue
        state: HealthState = check.status.value
        if _RANKING[state] > _RANKING[worst[0]]:
            worst = (state, check.detail)
    return worst


async def gateway_view(
    client: redis.Redis, settings: OpenClawSettings | None, summaries: SummarySourceCounts,
    trends: TrendStore, now: float,
) -> GatewayView:
    if settings is None:
        return GatewayView(configured=False, breaker="unknown", calls_per_minute=0, budget_left=None,
                           summaries_last_hour=summaries)
    gate = await read_gate(client, settings)
    days = await trends.tokens_per_day(now)
    return GatewayView(configured=True, breaker=gate.state, paused_s=gate.paused_s,
                       consecutive_failures=gate.failures, calls_per_minute=settings.calls_per_minute,
                       budget_left=gate.budget_left, summaries_last_hour=summaries,
                       tokens_per_day=[_token_day(d) for d in days])


def _token_day(day: TokenDay) -> TokenDayView:
    return TokenDayView(day=time.strftime("%Y-%m-%d", time.gmtime(day.day)), calls=day.calls,
                        prompt_tokens=day.prompt, completion_tokens=day.completion, estimated_calls=day.estimated)


async def group_summaries(client: redis.Redis, sinks: Sequence[SinkSettings]) -> list[GroupSummaryView]:
    """Every open group of every grouped sink (at most GROUPS_MAX per sink), soonest due first."""
    found: list[GroupSummaryView] = []
    for sink in sinks:
        if sink.group_by == "none":
            continue
        reader = GroupReader(client, sink.name)
        names = await reader.due(GROUPS_MAX)
        async with client.pipeline(transaction=False) as pipe:
            for name in names:
                reader.queue_summary(pipe, name)
            replies = await pipe.execute() if names else []
        for i, name in enumerate(names):
            view = _summary(sink.name, name, replies[2 * i], replies[2 * i + 1])
            if view is not None:
                found.append(view)
    return found


def _summary(sink: str, group: str, fields: list[Any], queues: dict[Any, Any]) -> GroupSummaryView | None:
    count, notified, first_seen, last_seen, severity, first, dropped, notified_total = fields
    if count is None or first is None:
        return None
    try:
        alert = Alert.model_validate_json(first)
    except (ValidationError, ValueError):
        return None
    return GroupSummaryView(
        sink=sink, group_key=group, title=_title(group, alert, len(queues)),
        severity=_BY_RANK.get(int(severity or 0), Severity.INFO), count=int(count) + int(dropped or 0),
        notified=int(notified_total or notified or 0),
        first_seen=float(first_seen or 0), last_seen=float(last_seen or 0),
        queues={names.text(q): int(n) for q, n in queues.items()},
    )


def _title(group: str, first: Alert, queues: int) -> str:
    """A cause group is named by its cause (and how wide it is); any other by its first summary."""
    if not group.startswith("cause:"):
        return first.summary.title
    dl = first.dead_letter
    wide = f" — {queues:,} queues" if queues > 1 else ""
    return cause_of(dl.last_error, dl.parse_error).label + wide


def _list_source(job: GroupJob, first: DeadLetter) -> str | None:
    """The list DLQ a member is redriven into: its own (a cause group spans many), None for a kind record.

    A member stored before jobs carried their source is taken to be in the first job's DLQ when
    it came from the same queue.
    """
    if job.source_key:
        return job.source_key if job.source_kind is None else None
    if first.source_kind is None and job.queue == first.queue:
        return first.source_key
    return None


async def group_view(
    client: redis.Redis, sink: SinkSettings, group: str, members_max: int | None = None
) -> tuple[GroupView, Alert] | None:
    """One group with its members (the first `members_max`, else MEMBERS_MAX, in arrival order; 0: all)
    and its first alert."""
    limit = MEMBERS_MAX if members_max is None else members_max
    reader = GroupReader(client, sink.name)
    fields, queues = await reader.summary(group)
    summary = _summary(sink.name, group, fields, queues)
    if summary is None:
        return None
    first = Alert.model_validate_json(fields[5] or b"")
    notified_rank = int(fields[1] or 0)  # arrival numbers and `notified` count the jobs still named
    scored = await reader.arrivals(group, limit)
    arrivals: list[tuple[str, float]] = [(names.text(pair[0]), float(pair[1])) for pair in scored]
    members = [m for m, _n in arrivals]
    details = await reader.job_details(group, members) if members else []
    first_dl = first.dead_letter
    jobs = []
    for (member, arrival), detail in zip(arrivals, details, strict=True):
        job = _job(detail)
        if job is None:
            continue
        jobs.append(GroupMemberView(
            idempotency_key=member, queue=job.queue, job_id=job.job_id, job_name=job.job_name,
            attempts=job.attempts, last_error=job.last_error, entry_id=job.raw_digest,
            source=_list_source(job, first_dl),
            added_at=job.added_at, notified=arrival <= notified_rank,
        ))
    view = GroupView(**summary.model_dump(), jobs=jobs, jobs_total=summary.count)
    return view, first


def _job(raw: Any) -> GroupJob | None:
    if raw is None:
        return None
    try:
        return GroupJob.model_validate(json.loads(raw))
    except (ValidationError, ValueError):
        return None
