"""The console's actions (every `/api/v1` POST/PUT/DELETE goes through `ConsoleActions`).

    redrive_entry(source, entry_id, who)       -> ActionResult   back to its work queue + PagerDuty resolve
    redrive_group(sink, group_key, who)        -> ActionResult   every member still in an archive
    retry_undeliverable(record_id, who)        -> ActionResult   deliver the stored alert again
    discard_undeliverable(record_id, who)      -> ActionResult
    create_silence(body, who)                  -> SilenceView
    expire_silence(silence_id, who)            -> ActionResult

`who` is the caller's name (the `X-Console-User` header or a body `author`,
else `token`). Every action, refused or done, is appended to the audit list.
The token check is the API's job (bridge.console.api), not this module's.

Redrive reuses `bridge.stores.requeue.move_batch` (one atomic script per
entry: archive → work queue, attempts reset) and then queues a PagerDuty
resolve (`event_action: resolve`, the trigger's dedup_key) for each
PagerDuty sink the alert was handed to, through `Resolver` (by default
`bridge.delivery.resolve.enqueue_resolve`: durable, through the sink queue).
Retry reuses `bridge.delivery.redeliver.retry_one` (through the ledger).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import redis.asyncio as redis

from bridge.console.entries import Record
from bridge.console.history import record_act
from bridge.console.service import ConsoleService, record_id, silence_view
from bridge.console.views import ActionResult, SilenceCreate, SilenceView
from bridge.core import names
from bridge.core.resolves import incident_key
from bridge.delivery.redeliver import retry_one
from bridge.delivery.send import Deliverer, Route
from bridge.intake.cause import cause_key
from bridge.sinks.sink_registry import SINKS
from bridge.stores.archive import archive_key
from bridge.stores.audit import AuditLog
from bridge.stores.requeue import Plan, finish_staged, move_batch, quarantine_plan
from bridge.stores.silences import Silence, SilenceFilter, SilenceStore, new_id
from bridge.stores.undeliverable_records import UndeliverableStore

QUARANTINE_BATCH = 1000  # entries one console redrive of a quarantine list moves at most

log = logging.getLogger(__name__)


class Resolver(Protocol):
    """Queue one PagerDuty resolve for `sink` (the shape of `bridge.delivery.resolve.enqueue_resolve`)."""

    async def __call__(self, client: redis.Redis, sink: str, record: Record) -> None: ...


class SilenceError(ValueError):
    """A silence the console refuses to create (no matcher, or an end in the past)."""


class ConsoleActions:
    """Changes made from the console (see module doc)."""

    def __init__(
        self,
        service: ConsoleService,
        client: redis.Redis,
        *,
        resolver: Resolver,
        routes: Mapping[str, Route] | None = None,
        deliverer: Deliverer | None = None,
        silences: SilenceFilter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._service = service
        self._redis = client
        self.redis = client
        self._resolver = resolver
        self._routes = dict(routes or {})
        self._deliverer = deliverer
        self._silence_filter = silences
        self._clock = clock
        self.audit = AuditLog(client, clock=clock)
        self._silences = SilenceStore(client, clock)

    async def _done(self, who: str, action: str, target: str, ok: bool, message: str, count: int = 0) -> ActionResult:
        await self.audit.append(who, action, target, "ok" if ok else "refused", message)
        return ActionResult(ok=ok, action=action, message=message, count=count)

    # --- redrive --------------------------------------------------------------------------

    async def redrive_entry(self, source: str, entry_id: str, who: str) -> ActionResult:
        target = f"{source} {entry_id}"
        ok, message = await self._redrive(source, entry_id, who)
        return await self._done(who, "redrive", target, ok, message, 1 if ok else 0)

    async def _redrive(self, source: str, entry_id: str, who: str, action: str = "redrive") -> tuple[bool, str]:
        work = names.work_queue(source)
        if self._service.is_kind(source) or work is None:
            return False, f"{source} is not a dead_letter: list; retry its jobs in the job system's own UI"
        raw = await self._service.find_raw(source, entry_id)
        if raw is None:
            return False, "no such entry in the archive (already redriven?)"
        plan = Plan(source=archive_key(source), target=work, dlq=source)
        left = await finish_staged(self._redis, plan)  # a killed cross-slot redrive of this DLQ (cluster)
        if not await move_batch(self._redis, plan, [raw]):
            return False, "the entry left the archive meanwhile"
        await record_act(self._redis, source, entry_id, who, action, self._clock())
        resolved = await self._resolve(await self._service.record(source, entry_id))
        note = f"; PagerDuty resolve queued for {resolved}" if resolved else ""
        if left:
            note += f"; also pushed {left} entries an interrupted redrive left in staging"
        return True, f"moved to {names.display(work)}{note}"

    async def queue_resolves(self, record: Record | None) -> str:
        """Queue the PagerDuty resolves a redrive of `record` calls for, as a single redrive does
        (bulk redrives, bridge.console.bulk); the sinks, comma-separated."""
        return await self._resolve(record)

    async def _resolve(self, record: Record | None) -> str:
        if record is None:
            return ""
        resolving = {s.name for s in self._service.sinks if SINKS.of(s).resolves(s)}
        sinks = [s for s in record.sinks if s in resolving]
        for sink in sinks:
            try:
                await self._resolver(self._redis, sink, record)
            except Exception:  # the redrive stands; the resolve is logged as missing
                log.exception("console: PagerDuty resolve for %s not queued", sink)
        return ", ".join(sinks)

    async def redrive_group(self, sink: str, group_key: str, who: str) -> ActionResult:
        """Every member of the group (a cause group spans DLQs: each job back into its own DLQ's work
        queue), each archive read once; a member of another kind is left to its job system."""
        target = f"{sink} {group_key}"
        group = await self._service.group(sink, group_key, every_member=True)
        if group is None:
            return await self._done(who, "redrive-group", target, False, "no such open group")
        by_source: dict[str, list[str]] = {}
        other_kinds = 0
        for job in group.jobs:
            if job.source is None or self._service.is_kind(job.source) or names.work_queue(job.source) is None:
                other_kinds += 1
            else:
                by_source.setdefault(job.source, []).append(job.entry_id)
        moved = 0
        for source, entry_ids in by_source.items():
            moved += await self._redrive_many(source, entry_ids, who)
        message = f"{moved} of {len(group.jobs)} jobs moved back to their work queue"
        if other_kinds:
            message += f"; {other_kinds} of another kind: retry them in their job system's own UI"
        return await self._done(who, "redrive-group", target, moved > 0, message, moved)

    async def _redrive_many(self, source: str, entry_ids: list[str], who: str) -> int:
        """`_redrive` of many entries of one list DLQ, its archive read once; how many moved."""
        work = names.work_queue(source)
        assert work is not None
        plan = Plan(source=archive_key(source), target=work, dlq=source)
        await finish_staged(self._redis, plan)
        moved = 0
        for entry_id, raw in (await self._service.find_raws(source, entry_ids)).items():
            if await move_batch(self._redis, plan, [raw]):
                moved += 1
                await record_act(self._redis, source, entry_id, who, "redrive-group", self._clock())
                await self._resolve(await self._service.record(source, entry_id))
        return moved

    async def redrive_quarantine(self, source: str, who: str) -> ActionResult:
        """The oldest `QUARANTINE_BATCH` quarantined entries of a DLQ back onto it, byte for byte,
        as `dlq-bridge redrive QUEUE --quarantine` moves them (one atomic script each)."""
        if self._service.is_kind(source) or names.work_queue(source) is None:
            return await self._done(who, "redrive-quarantine", source, False, f"{source} is not a dead_letter: list")
        plan = quarantine_plan(source)
        found = await self._redis.lrange(plan.source, -QUARANTINE_BATCH, -1)
        raws = [r if isinstance(r, bytes) else r.encode() for r in reversed(found)]
        moved = await move_batch(self._redis, plan, raws) if raws else 0
        message = f"{moved} quarantined entries pushed back onto {names.display(source)}"
        return await self._done(who, "redrive-quarantine", source, moved > 0, message, moved)

    # --- undeliverable --------------------------------------------------------------------

    async def retry_undeliverable(self, record_id_: str, who: str) -> ActionResult:
        store = UndeliverableStore(self._redis)
        item = next((s for s in await store.records() if record_id(s) == record_id_), None)
        if item is None:
            return await self._done(who, "retry", record_id_, False, "no such undeliverable record")
        if self._deliverer is None:
            return await self._done(who, "retry", record_id_, False, "delivery is not running in this process")
        ok, message = await retry_one(item, self._routes, self._deliverer, store)
        return await self._done(who, "retry", record_id_, ok, message, 1 if ok else 0)

    async def discard_undeliverable(self, record_id_: str, who: str) -> ActionResult:
        store = UndeliverableStore(self._redis)
        item = next((s for s in await store.records() if record_id(s) == record_id_), None)
        if item is None or not await store.remove(item):
            return await self._done(who, "discard", record_id_, False, "no such undeliverable record")
        return await self._done(who, "discard", record_id_, True, "discarded", 1)

    # --- silences -------------------------------------------------------------------------

    async def create_silence(self, body: SilenceCreate, who: str) -> SilenceView:
        """Raises SilenceError for a silence without matcher or whose end is not in the future."""
        now = self._clock()
        ends = body.ends_at if body.ends_at is not None else now + (body.duration_s or 3600.0)
        matchers = [m for m in (body.queue, body.job_name, body.fingerprint) if m]
        if not matchers:
            raise SilenceError("a silence needs at least one of queue, job_name, fingerprint")
        if ends <= now:
            raise SilenceError("ends_at must be in the future")
        silence = Silence(id=new_id(), queue=body.queue or None, job_name=body.job_name or None,
                          fingerprint=body.fingerprint or None, starts_at=now, ends_at=ends, reason=body.reason,
                          author=body.author or who, webhooks=body.webhooks)
        await self._silences.put(silence)
        if self._silence_filter is not None:
            self._silence_filter.remember(silence)
        await self.audit.append(silence.author, "silence", silence.id, "ok", _describe(silence))
        return silence_view(silence, now)

    async def expire_silence(self, silence_id: str, who: str) -> ActionResult:
        ended = await self._silences.expire(silence_id, who)
        if ended is None:
            return await self._done(who, "expire-silence", silence_id, False, "no such silence")
        if self._silence_filter is not None:
            self._silence_filter.remember(ended)
        return await self._done(who, "expire-silence", silence_id, True, "expired", 1)


def _describe(silence: Silence) -> str:
    parts = [f"{name}={value}" for name, value in
             (("queue", silence.queue), ("job_name", silence.job_name), ("fingerprint", silence.fingerprint)) if value]
    text = ", ".join(parts) + (" (webhooks too)" if silence.webhooks else "")
    return f"{text}: {silence.reason}" if silence.reason else text


def enqueue_resolve_seam(
    enqueue: Callable[..., Awaitable[object]],
) -> Resolver:
    """A Resolver over `enqueue_resolve(client, sink, dedup_key, *, idempotency_key, digest, reason, severity,
    fingerprint, queue, cause)` (bridge.delivery.resolve)."""

    async def resolve(client: redis.Redis, sink: str, record: Record) -> None:
        dl = record.alert.dead_letter
        await enqueue(client, sink, incident_key(dl.job_id), idempotency_key=record.alert.idempotency_key,
                      digest=dl.raw_digest, reason="redriven", severity=record.alert.severity,
                      fingerprint=dl.fingerprint, queue=dl.queue, cause=cause_key(dl.last_error, dl.parse_error))

    return resolve
