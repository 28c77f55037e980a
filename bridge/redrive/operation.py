"""The one redrive operation: entries back to their work queue, their incidents resolved, who acted recorded.

    Redrive.walk(plan, who, progress)          -> Outcome   the CLI and the console's quarantine action:
                                                            a list walked oldest first (archive, DLQ or
                                                            quarantine list), matching entries moved
    Redrive.entries(dlq, digests, who, action) -> Outcome   the console's entry and group actions: archived
                                                            entries named by their digest
    Redrive.move_found(dlq, found, who, action)-> Outcome   bulk actions: archived bytes already read
    Redrive.audit(who, action, target, line)                one audit record (dlq_bridge:audit)

Every move is one atomic script per entry (bridge.stores.requeue.move_each; a slice of them in one
pipeline). For the entries of a slice that left an archive, the act is then recorded on each entry
(`who`, the action, when: its history) and a resolve is queued for every sink the alert was handed
to whose plug-in `resolves` (PagerDuty and Alertmanager with `resolve_on_retry`): the same outcome
from the shell, the page and a bulk action.
An entry of the DLQ itself was never alerted (nothing to resolve); a quarantined entry goes back onto
its DLQ byte for byte and is alerted again as a new entry, so its quarantine alert is not resolved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import redis.asyncio as redis

from bridge.core import names
from bridge.core.resolves import incident_key
from bridge.intake.cause import cause_key
from bridge.intake.chain import normalize
from bridge.intake.envelope import raw_digest
from bridge.settings import SinkSettings
from bridge.sinks.sink_registry import SINKS
from bridge.stores.archive import Archive, Record, archive_key
from bridge.stores.audit import AuditLog
from bridge.stores.requeue import Plan, finish_staged, move_each
from bridge.stores.search_index import record_acts
from bridge.stores.seen_before import SeenBeforeStore

CHUNK = 500
ARCHIVE_SLICE = 50  # archived entries moved in one pipeline before their acts and resolves are written
SAMPLES = 10
Origin = Literal["archive", "dlq", "quarantine"]

log = logging.getLogger(__name__)


class Resolver(Protocol):
    """Queue one resolve for `sink` (the shape of `enqueue_resolve_seam(bridge.delivery.resolve.enqueue_resolve)`)."""

    async def __call__(self, client: redis.Redis, sink: str, record: Record) -> None: ...


@dataclass
class Outcome:
    """What one call moved; `line()` in bridge.redrive.messages says it in one line."""

    origin: Origin
    plan: Plan
    scanned: int = 0
    matched: int = 0
    moved: int = 0
    vanished: int = 0  # matched, but gone before the move (claimed or redriven meanwhile)
    staged: int = 0  # pushed from the staging list an interrupted cross-slot redrive left (cluster)
    samples: list[str] = field(default_factory=list)
    found_ids: set[str] = field(default_factory=set)  # the given job ids seen
    resolved: set[str] = field(default_factory=set)  # sinks a resolve was queued for

    @property
    def missing_ids(self) -> list[str]:
        return sorted(self.plan.job_ids - self.found_ids)

    def limit_reached(self) -> bool:
        return self.plan.limit is not None and self.matched >= self.plan.limit


def origin_of(plan: Plan) -> Origin:
    if plan.source == plan.dlq:
        return "dlq"
    return "archive" if plan.source == archive_key(plan.dlq) else "quarantine"


def job_id(raw: bytes, dlq: str) -> str:
    return normalize(raw, dlq, excerpt_max=64).job_id


class Redrive:
    """See module doc. `sinks`: the configured sinks (which of them resolve is their plug-in's trait)."""

    def __init__(
        self,
        client: redis.Redis,
        sinks: Sequence[SinkSettings],
        *,
        resolver: Resolver,
        archive_max: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._resolving = frozenset(s.name for s in sinks if SINKS.of(s).resolves(s))
        self._resolver = resolver
        self._archive = Archive(client)
        self._archive_max = archive_max
        self._clock = clock
        self._audit = AuditLog(client, clock=clock)
        self._seen_before = SeenBeforeStore(client, clock=clock)  # each cause redriven: its last action

    # --- a list walked oldest first (the CLI, the console's quarantine action) ----------------------

    async def walk(
        self, plan: Plan, who: str, action: str = "redrive", progress: Callable[[Outcome], None] | None = None,
        chunk: int = CHUNK, note: str = "",
    ) -> Outcome:
        """Move the entries of `plan.source` that match, oldest first, one atomic script each."""
        outcome = Outcome(origin_of(plan), plan)
        outcome.staged = await finish_staged(self._redis, plan)
        skipped = 0  # entries left in place at the right end (not matching, or dry run)
        while not outcome.limit_reached():
            raws = await self._redis.lrange(plan.source, -(skipped + chunk), -(skipped + 1))
            if not raws:
                break
            scanned_before = outcome.scanned
            batch = _select(outcome, [names.as_bytes(r) for r in reversed(raws)])
            skipped += outcome.scanned - scanned_before - len(batch)
            await self._move(outcome, batch, who, action, note)
            if progress is not None:
                progress(outcome)
        return outcome

    # --- archived entries named by digest (the console's entry, group and bulk actions) ------------

    async def entries(self, dlq: str, digests: Collection[str], who: str, action: str, note: str = "") -> Outcome:
        found = await self._archive.find_raws(dlq, digests, self._archive_max)
        return await self.move_found(dlq, found, who, action, note)

    async def move_found(
        self, dlq: str, found: Mapping[str, bytes], who: str, action: str, note: str = "",
    ) -> Outcome:
        """Move these archived entries (digest → bytes) of the list DLQ `dlq` to its work queue."""
        work = names.work_queue(dlq)
        if work is None:
            raise ValueError(f"{dlq} has no work queue")
        plan = Plan(source=archive_key(dlq), target=work, dlq=dlq)
        outcome = Outcome("archive", plan)
        outcome.staged = await finish_staged(self._redis, plan)
        outcome.scanned = outcome.matched = len(found)
        await self._move(outcome, list(found.values()), who, action, note)
        return outcome

    async def _move(self, outcome: Outcome, batch: list[bytes], who: str, action: str, note: str = "") -> None:
        """One pipeline of scripts per slice (each entry atomic on its own); after each slice of archived
        entries, who acted and their resolves (a kill between the two loses at most one slice's)."""
        step = ARCHIVE_SLICE if outcome.origin == "archive" else max(len(batch), 1)
        for start in range(0, len(batch), step):
            part = batch[start:start + step]
            done = await move_each(self._redis, outcome.plan, part)
            moved = [raw for raw, ok in zip(part, done, strict=True) if ok]
            outcome.moved += len(moved)
            outcome.vanished += len(part) - len(moved)
            if outcome.origin == "archive" and moved:
                digests = [raw_digest(raw) for raw in moved]
                await record_acts(self._redis, outcome.plan.dlq, digests, who, action, self._clock())
                resolved, causes = await self._resolve(outcome.plan.dlq, digests)
                outcome.resolved |= resolved
                await self._seen_before.acted(causes, "redriven", who, note)

    async def _resolve(self, dlq: str, digests: list[str]) -> tuple[set[str], set[str]]:
        """Queue a resolve on every resolving sink each entry's alert was handed to; those sinks, and the
        causes of the entries (their seen-before history records the redrive)."""
        resolved: set[str] = set()
        causes: set[str] = set()
        for stored in await self._archive.records(dlq, digests):
            record = Record.parse(stored)
            if record is None:
                continue
            dl = record.alert.dead_letter
            causes.add(cause_key(dl.last_error, dl.parse_error))
            for sink in sorted(set(record.sinks) & self._resolving):
                try:
                    await self._resolver(self._redis, sink, record)
                    resolved.add(sink)
                except Exception:  # the redrive stands; the missing resolve is logged
                    log.exception("redrive: the resolve for %s was not queued", sink)
        return resolved, causes

    # --- the audit list ----------------------------------------------------------------------------

    async def audit(self, who: str, action: str, target: str, ok: bool, detail: str) -> None:
        await self._audit.append(who, action, target, "ok" if ok else "refused", detail)

    async def depths(self, dlq: str) -> dict[Origin, int]:
        """How many entries each list of `dlq` holds (the hint when nothing matched)."""
        archived, dead, quarantined = await self._archive.list_depths(dlq)
        return {"archive": archived, "dlq": dead, "quarantine": quarantined}


def _select(outcome: Outcome, raws: list[bytes]) -> list[bytes]:
    """The entries of this chunk to move; counts scanned and matched ones."""
    plan, batch = outcome.plan, []
    for raw in raws:
        if outcome.limit_reached():
            break
        outcome.scanned += 1
        if plan.job_ids:
            found = job_id(raw, plan.dlq)
            if found not in plan.job_ids:
                continue
            outcome.found_ids.add(found)
        outcome.matched += 1
        if plan.dry_run:
            if len(outcome.samples) < SAMPLES:
                outcome.samples.append(job_id(raw, plan.dlq))
        else:
            batch.append(raw)
    return batch


def enqueue_resolve_seam(enqueue: Callable[..., Awaitable[object]]) -> Resolver:
    """A Resolver over `enqueue_resolve(client, sink, dedup_key, *, idempotency_key, digest, reason, severity,
    fingerprint, queue, cause)` (bridge.delivery.resolve)."""

    async def resolve(client: redis.Redis, sink: str, record: Record) -> None:
        dl = record.alert.dead_letter
        await enqueue(client, sink, incident_key(dl.job_id), idempotency_key=record.alert.idempotency_key,
                      digest=dl.raw_digest, reason="redriven", severity=record.alert.severity,
                      fingerprint=dl.fingerprint, queue=dl.queue, cause=cause_key(dl.last_error, dl.parse_error))

    return resolve


def default_resolver() -> Resolver:
    """`bridge.delivery.resolve.enqueue_resolve`: durable, through each resolving sink's queue."""
    from bridge.delivery.resolve import enqueue_resolve

    return enqueue_resolve_seam(enqueue_resolve)
