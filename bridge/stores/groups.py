"""Fleet-wide alert groups: one notification per cause, not one per job.

The model is Alertmanager's aggregation group (`group_wait`, `group_interval`,
`repeat_interval`), with its state in Redis instead of one process's memory,
so any replica can add to a group and exactly one sends each notification
(docs/design.md, section 5b).

A group is keyed per sink by `cause:<severity>:<cause>` (docs/design.md, section 5d),
`fp:<fingerprint>`, `queue:<queue>` or `job:<idempotency key>` (the sink's `group_by`). Its life:

    first job ──group_wait──▶ #1  single (1 job: the ordinary card) or digest
       │                       │
       │   more jobs?  ──yes──▶ #n+1 digest "N more since …, M in all",
       │                       │     no sooner than group_interval after #n
       │                       no
       │                       ▼
       │        repeat_interval after #n: one `repeat`, then the group closes;
       │        the next job of that cause opens a new group (a new page).

Redis layout (all keys carry the sink's `{<sink>}` hash tag, one slot per
sink; names in `bridge.stores.keys`):

    dlq_bridge:groups:{S}:due          ZSET group key → when it is next due;
                                        while claimed: when the lease ends
    dlq_bridge:group:{S}:state:<G>     HASH count, notified (jobs covered by the
                                        notifications sent; both count the jobs still
                                        named, `dropped` those no longer), sequence (sent),
                                        first_seen, last_seen, previous_at,
                                        severity (rank), first (the first Alert,
                                        JSON), lease (token), claim_count and
                                        paged (of the claim in flight), closed_at
    dlq_bridge:group:{S}:jobs:<G>      ZSET idempotency key → arrival number
    dlq_bridge:group:{S}:job:<G>       HASH idempotency key → GroupJob JSON
    dlq_bridge:group:{S}:queues:<G>    HASH queue → jobs from it
    dlq_bridge:group:{S}:facets:<G>    HASH j:<job name>, k:<kind> → jobs; f:/l:<queue> → first/last
    dlq_bridge:group:{S}:gone:<G>      SET members redriven or gone (all: the incident resolves)

An open group names at most the sink's `group_members_max` jobs, however long it stays open:
past 1.5 times that, the add script drops the oldest jobs no notification or resolve still
needs and renumbers the rest (`group_scripts.TRIM_LUA`, docs/design.md section 5b).
    dlq_bridge:group:{S}:prev-…:<G>    the same six for the cause's last closed
                                        group (renamed when a new one opens; they
                                        expire 7 days after closing)

Claiming is one Lua script per group: it checks the group is still due,
moves its due score to `now + lease_s` and records a lease token. A second
replica's script then finds it not due. A replica killed -9 after claiming
never calls `notified`; when the lease ends the score is in the past again
and any replica claims it (the ledger key is the same, so a notification the
dead replica did send is not sent twice). `notified` with a stale token is
ignored. Every timer is computed from the injected clock, so tests run on a
fake clock against real Redis.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from bridge.core import names
from bridge.core.formats import RecordFormat, format_of
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, GroupJob, Notification
from bridge.intake.cause import cause_key
from bridge.sinks.sink_registry import SINKS
from bridge.sinks.sink_settings import SinkSettingsBase
from bridge.stores import group_scripts as scripts
from bridge.stores import keys
from bridge.stores.group_reply import build_notification

log = logging.getLogger(__name__)

SAMPLES = 10
SUMMARY_FIELDS = (  # `GroupReader.summary`; the last two: jobs no longer named, jobs notified in all
    "count", "notified", "first_seen", "last_seen", "severity", "first", "dropped", "notified_total")
JOBS_PER_EVENT = 500
UNSENT_MAX = 20 * JOBS_PER_EVENT  # jobs a webhook's group keeps for its next pages beyond group_members_max
CLOSED_TTL_S = 7 * 24 * 3600


def group_key(alert: Alert, group_by: str) -> str:
    """`fp:<fingerprint>`, `queue:<queue>`, `cause:<severity>:<cause>` or `job:<idempotency key>`."""
    dl = alert.dead_letter
    cause = cause_key(dl.last_error, dl.parse_error) if group_by == "cause" else ""
    return group_key_of(group_by, dl.fingerprint, dl.queue, alert.idempotency_key,
                        cause=cause, severity=alert.severity.value)


def group_key_of(
    group_by: str, fingerprint: str, queue: str, idempotency_key: str, *, cause: str = "", severity: str = ""
) -> str:
    """`group_key` from the envelope's fields (`cause`: `bridge.intake.cause.cause_key`; `severity`: the routed one)."""
    if group_by == "fingerprint" and fingerprint:
        return f"fp:{fingerprint}"
    if group_by == "queue":
        return f"queue:{queue}"
    if group_by == "cause" and cause and severity:
        return f"cause:{severity}:{cause}"
    return f"job:{idempotency_key}"


@dataclass(frozen=True)
class GroupView:
    """What an operator sees of one open group: its size, how much was notified, sample jobs."""

    sink: str
    group_key: str
    count: int
    notified: int
    first_seen: float
    last_seen: float
    sample_keys: list[str]


class Grouper:
    """One sink's groups: `add` jobs, `claim_due` notifications, report them `notified`."""

    def __init__(
        self,
        client: aioredis.Redis,
        sink_settings: SinkSettingsBase,
        clock: Callable[[], float] = time.time,
        *,
        metrics: Metrics | None = None,
        lease_s: float = 120.0,
        closed_ttl_s: int = CLOSED_TTL_S,
        formats: RecordFormat | None = None,
    ) -> None:
        self._client = client
        self._formats = formats or RecordFormat()  # the runtime's: it follows the fleet (bridge.core.formats)
        self.settings = sink_settings
        self.sink = sink_settings.name
        self._clock = clock
        self._metrics = metrics
        self.lease_s = lease_s
        self._closed_ttl_s = closed_ttl_s
        self._add = client.register_script(scripts.ADD_LUA)
        self._claim = client.register_script(scripts.CLAIM_LUA)
        self._notified = client.register_script(scripts.NOTIFIED_LUA)
        self._renew = client.register_script(scripts.RENEW_LUA)
        self._left = client.register_script(scripts.LEFT_LUA)
        self._send_now = client.register_script(scripts.SEND_NOW_LUA)
        self._rewrite_first = client.register_script(scripts.REWRITE_FIRST_LUA)
        # Machine receivers (webhooks) get every job once, in pages of JOBS_PER_EVENT; people get samples.
        self._page = SINKS.of(sink_settings).every_job
        self._max_jobs = JOBS_PER_EVENT if self._page else SAMPLES
        # A resolving sink keeps the jobs a resolve must match until they are gone (`left`).
        self._resolving = SINKS.of(sink_settings).resolves(sink_settings)

    def key_for(self, alert: Alert) -> str:
        return group_key(alert, self.settings.group_by)

    def _keys(self, group: str, previous: bool = False) -> list[str]:
        return [
            keys.groups_due(self.sink),
            keys.group(self.sink, group, previous),
            keys.group_jobs(self.sink, group, previous),
            keys.group_job_details(self.sink, group, previous),
            keys.group_queues(self.sink, group, previous),
            keys.group_facets(self.sink, group, previous),
            keys.group_gone(self.sink, group, previous),
        ]

    async def add(self, alert: Alert) -> None:
        """Put `alert` into its group (a replayed job is counted once)."""
        await self.admit(alert)

    async def admit(self, alert: Alert) -> bool:
        """`add`, telling whether the job is new to its group (False: a replay)."""
        group, now = self.key_for(alert), self._clock()
        job = self._formats.write(GroupJob.of(alert, now).model_dump_json())
        s, dl = self.settings, alert.dead_letter
        args: list[str | int | float] = [
            group, alert.idempotency_key, job, dl.queue, repr(now),
            alert.severity.rank, self._formats.alert_json(alert), s.group_wait_s, s.group_interval_s,
            dl.job_name or "", dl.source_kind or "list", s.group_members_max, int(self._resolving),
            UNSENT_MAX if self._page else 0,
        ]
        both = self._keys(group) + self._keys(group, previous=True)[1:]
        added = int(await self._add(keys=both, args=args))  # 2: it opened a new group
        if added == 2 and self._metrics is not None:
            await self._update_gauge()
        return added > 0

    async def claim_due(self, limit: int = 10) -> list[Notification]:
        """Lease up to `limit` due groups for this replica and build their notifications."""
        now = self._clock()
        due = await self._client.zrangebyscore(
            keys.groups_due(self.sink), "-inf", repr(now), start=0, num=limit
        )
        claimed = []
        for raw in due:
            group = raw.decode() if isinstance(raw, bytes) else str(raw)
            notification = await self._claim_one(group, now)
            if notification is not None:
                claimed.append(notification)
        if self._metrics is not None:
            await self._update_gauge()
        return claimed

    async def _claim_one(self, group: str, now: float) -> Notification | None:
        token = secrets.token_hex(8)
        args: list[str | int | float] = [
            group, repr(now), repr(now + self.lease_s), token, self._max_jobs, int(self._page),
        ]
        reply = await self._claim(keys=self._keys(group), args=args)
        if not reply:
            return None
        found = format_of(_text(reply[7]))
        if found > self._formats.reads:  # its lease runs out and a replica that reads it claims it
            log.warning("sink %s: group %s's first alert is of record format %d (this replica reads up to %d); "
                        "left for a newer replica", self.sink, group, found, self._formats.reads)
            if self._metrics is not None:
                self._metrics.newer_format_left.labels(f"groups:{self.sink}").inc()
            return None
        return build_notification(self.sink, group, token, reply, self.settings.outage_min_queues)

    async def notified(self, notification: Notification, delivered: bool) -> None:
        """Record the outcome of a claimed notification (see `record`)."""
        if not await self.record(notification, delivered):
            log.info("sink %s: group %s #%d: lease lost, outcome left to its new claimant",
                     self.sink, notification.group_key, notification.sequence)

    async def record(self, notification: Notification, delivered: bool) -> bool:
        """Record the outcome of a claimed notification; False when the lease was lost.

        Delivered: the group's next timer starts (group_interval when it grew
        meanwhile, else repeat_interval; after a repeat the group closes).
        Not delivered (undeliverable): nothing is marked sent; the group is due
        again after group_interval, with whatever it gained by then, unless no job came for
        repeat_interval: then it closes undelivered (the undeliverable records hold its notification).
        """
        n, s = notification, self.settings
        args: list[str | int | float] = [
            n.group_key, n.claim, "1" if delivered else "0", repr(self._clock()), n.sequence,
            s.group_interval_s, s.repeat_interval_s, n.kind, self._closed_ttl_s,
        ]
        result = int(await self._notified(keys=self._keys(n.group_key), args=args))
        if result and delivered and self._metrics is not None:
            self._metrics.notifications.labels(self.sink, n.kind).inc()
        if self._metrics is not None:
            await self._update_gauge()
        return result > 0

    async def renew(self, notification: Notification) -> bool:
        """Extend this replica's lease by `lease_s` (a delivery still retrying); False once lost."""
        group = notification.group_key
        until = repr(self._clock() + self.lease_s)
        args: list[str | int | float] = [group, notification.claim, until]
        return bool(await self._renew(keys=self._keys(group)[:2], args=args))

    async def send_now(self) -> list[str]:
        """Make every group holding jobs no notification covered due at once; returns those groups.

        For the end of burst mode: nothing more is coming, so `group_wait` and
        `group_interval` would only delay the cards (and the process would exit first).
        """
        now, pending = repr(self._clock()), []
        for raw in await self._client.zrange(keys.groups_due(self.sink), 0, -1):
            group = _text(raw)
            if int(await self._send_now(keys=self._keys(group)[:2], args=[group, now])):
                pending.append(group)
        return pending

    async def settled(self, groups: list[str]) -> bool:
        """True once none of `groups` is due or claimed: each was notified, or failed and waits again."""
        now = self._clock()
        for group in groups:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.zscore(keys.groups_due(self.sink), group)
                pipe.hexists(keys.group(self.sink, group), "lease")
                score, leased = await pipe.execute()
            if leased or (score is not None and float(score) <= now):
                return False
        return True

    async def left(self, group: str, member: str) -> Alert | None:
        """Record that `member` was redriven or left its store; the group's first alert once
        every job of `group` (open, or the cause's last closed one) has, else None.

        The group's incident names its first job, so the resolve that closes it carries that
        job's dedup key (a resolve on a grouped sink, `bridge.delivery.resolve`).
        """
        names = [f(self.sink, group, previous) for previous in (False, True)
                 for f in (keys.group, keys.group_jobs, keys.group_gone)]
        done, first = await self._left(keys=names, args=[member])
        return Alert.model_validate_json(_text(first)) if int(done) and first else None

    async def newer_firsts(self, fmt: int) -> list[tuple[str, str]]:
        """(group, first alert) of every open group whose first alert is of a format newer than `fmt`."""
        found = []
        for raw in await self._client.zrange(keys.groups_due(self.sink), 0, -1):
            group = _text(raw)
            first = await self._client.hget(keys.group(self.sink, group), "first")
            if first is not None and format_of(_text(first)) > fmt:
                found.append((group, _text(first)))
        return found

    async def rewrite_first(self, group: str, first: str) -> bool:
        """Replace an open group's first alert with the same alert in an older format."""
        return bool(await self._rewrite_first(keys=[keys.group(self.sink, group)], args=[first]))

    async def open_groups(self) -> int:
        """Groups not yet closed (each has a timer in the due index)."""
        return int(await self._client.zcard(keys.groups_due(self.sink)))

    async def members(
        self, group: str, start: int = 0, stop: int = -1, previous: bool = False
    ) -> list[str]:
        """The idempotency keys of a group's jobs in arrival order (for peek/undeliverable).

        `previous=True`: the members of the same cause's last closed group.
        """
        raw = await self._client.zrange(keys.group_jobs(self.sink, group, previous), start, stop)
        return [m.decode() if isinstance(m, bytes) else str(m) for m in raw]

    async def views(self, limit: int = 50, samples: int = 10) -> list[GroupView]:
        """Read-only snapshots of up to `limit` open groups, soonest due first (for `peek --groups`)."""
        views = []
        for raw in await self._client.zrange(keys.groups_due(self.sink), 0, limit - 1):
            group = _text(raw)
            fields = ("count", "notified", "first_seen", "last_seen", "dropped", "notified_total")
            count, notified, first, last, dropped, total = await self._client.hmget(keys.group(self.sink, group),
                                                                                    fields)
            members = await self.members(group, 0, samples - 1)
            views.append(GroupView(self.sink, group, int(count or 0) + int(dropped or 0),
                                   int(total or notified or 0), float(first or 0), float(last or 0), members))
        return views

    async def _update_gauge(self) -> None:
        assert self._metrics is not None
        self._metrics.open_groups.labels(self.sink).set(await self.open_groups())


class GroupReader:
    """Read-only: one sink's open groups as the console shows them (the keys `Grouper` writes)."""

    def __init__(self, client: aioredis.Redis, sink: str) -> None:
        self._client = client
        self.sink = sink

    async def open_count(self) -> int:
        """Groups not yet closed (`Grouper.open_groups`, without a Grouper's scripts)."""
        return int(await self._client.zcard(keys.groups_due(self.sink)))

    async def due(self, limit: int) -> list[str]:
        """The first `limit` open group keys, soonest due first (names exact to the byte)."""
        found: list[Any] = await self._client.zrange(keys.groups_due(self.sink), 0, limit - 1)
        return [names.decode(g) for g in found]

    def queue_summary(self, pipe: Pipeline, group: str) -> None:
        """Two replies: the state fields `SUMMARY_FIELDS` (HMGET), then queue → jobs (HGETALL)."""
        pipe.hmget(keys.group(self.sink, group), list(SUMMARY_FIELDS))
        pipe.hgetall(keys.group_queues(self.sink, group))

    async def summary(self, group: str) -> tuple[list[Any], dict[Any, Any]]:
        """`queue_summary` of one group, read in two calls."""
        fields = await self._client.hmget(keys.group(self.sink, group), list(SUMMARY_FIELDS))
        return list(fields), dict(await self._client.hgetall(keys.group_queues(self.sink, group)))

    async def arrivals(self, group: str, limit: int) -> list[tuple[Any, Any]]:
        """(member, arrival number) of the first `limit` members (0: all), in arrival order."""
        found: list[Any] = await self._client.zrange(keys.group_jobs(self.sink, group), 0, limit - 1,
                                                     withscores=True)
        return [(member, score) for member, score in found]

    async def job_details(self, group: str, members: list[str]) -> list[Any]:
        """The stored GroupJob JSON of each member (None where missing)."""
        return list(await self._client.hmget(keys.group_job_details(self.sink, group), members))

    def queue_member(self, pipe: Pipeline, group: str, member: str) -> None:
        """Four replies: the member's arrival and the group's `notified`, `previous_at` in the open
        group, then the same in the cause's last closed one."""
        for previous in (False, True):
            pipe.zscore(keys.group_jobs(self.sink, group, previous=previous), member)
            pipe.hmget(keys.group(self.sink, group, previous=previous), ["notified", "previous_at"])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
