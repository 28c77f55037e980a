"""The console's actions (every `/api/v1` POST/PUT/DELETE goes through `ConsoleActions`).

    redrive_entry(source, entry_id, who, note) -> ActionResult   back to its work queue + resolves
    redrive_group(sink, group_key, who, note)  -> ActionResult   every member still in an archive
    retry_undeliverable(record_id, who)        -> ActionResult   deliver the stored alert again
    retry_all_undeliverable(who)               -> ActionResult   each record, oldest first, as the CLI does
    discard_undeliverable(record_id, who)      -> ActionResult
    create_silence(body, who)                  -> SilenceView
    expire_silence(silence_id, who)            -> ActionResult
    update_silence(silence_id, body, who)      -> SilenceView | None   (edit, extend)
    comment_silence(silence_id, text, who)     -> SilenceView | None

`who` is the caller's name (the `X-Console-User` header or a body `author`,
else `token`). Every action, refused or done, is appended to the audit list.
The token check is the API's job (bridge.console.api), not this module's.

Every redrive goes through the one redrive operation (bridge.redrive.operation.Redrive, which
`dlq-bridge redrive` uses too): one atomic script per entry (archive → work queue, attempts reset),
the act recorded on the entry, and a resolve queued for every sink the alert was handed to whose
plug-in resolves (PagerDuty, Alertmanager), through `Resolver` (by default
`bridge.delivery.resolve.enqueue_resolve`: durable, through the sink queue).
Retry and Retry all reuse `bridge.delivery.redeliver` (retry_one, retry_all: through the ledger), as
`dlq-bridge undeliverable retry` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import redis.asyncio as redis
from pydantic import ValidationError

from bridge.console.service import ConsoleService, record_id
from bridge.console.silence_views import SilenceUpdate, silence_view
from bridge.console.views import ActionResult, SilenceCreate, SilenceView
from bridge.core import names
from bridge.core.silence_match import Matcher, MatcherSet
from bridge.delivery.redeliver import retry_all, retry_one
from bridge.delivery.send import Deliverer, Route
from bridge.redrive.messages import count
from bridge.redrive.operation import Outcome, Redrive, Resolver, enqueue_resolve_seam
from bridge.stores.audit import AuditLog
from bridge.stores.requeue import quarantine_plan
from bridge.stores.silences import Silence, SilenceEdit, SilenceFilter, SilenceStore, new_id, new_silence
from bridge.stores.undeliverable_records import UndeliverableStore

QUARANTINE_BATCH = 1000  # entries one console redrive of a quarantine list moves at most
RETRY_ALL_MAX = 1000  # undeliverable records one Retry all tries at most (the oldest)

__all__ = ["ConsoleActions", "Resolver", "SilenceError", "enqueue_resolve_seam"]


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
        self.redrive = Redrive(client, service.sinks, resolver=resolver,
                               archive_max=service.archive_max, clock=clock)
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

    async def redrive_entry(self, source: str, entry_id: str, who: str, note: str = "") -> ActionResult:
        """As `dlq-bridge redrive QUEUE --job-id … --note …`: the note goes with the cause's history."""
        target = f"{source} {entry_id}"
        ok, message = await self._redrive(source, entry_id, who, note)
        return await self._done(who, "redrive", target, ok, message, 1 if ok else 0)

    async def _redrive(self, source: str, entry_id: str, who: str, note: str) -> tuple[bool, str]:
        if self._service.is_kind(source) or names.work_queue(source) is None:
            return False, f"{source} is not a dead_letter: list; retry its jobs in the job system's own UI"
        outcome = await self.redrive.entries(source, [entry_id], who, "redrive", note)
        if outcome.matched == 0:
            return False, "no such entry in the archive (already redriven?)"
        if outcome.moved == 0:
            return False, "the entry left the archive meanwhile"
        return True, f"moved to {names.display(outcome.plan.target)}{_notes(outcome)}"

    async def redrive_group(self, sink: str, group_key: str, who: str, note: str = "") -> ActionResult:
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
        moved, resolved = 0, set[str]()
        for source, entry_ids in by_source.items():
            outcome = await self.redrive.entries(source, entry_ids, who, "redrive-group", note)
            moved, resolved = moved + outcome.moved, resolved | outcome.resolved
        message = f"{moved} of {len(group.jobs)} jobs moved back to their work queue"
        if resolved:
            message += f"; resolves queued for {', '.join(sorted(resolved))}"
        if other_kinds:
            message += f"; {other_kinds} of another kind: retry them in their job system's own UI"
        return await self._done(who, "redrive-group", target, moved > 0, message, moved)

    async def redrive_quarantine(self, source: str, who: str) -> ActionResult:
        """The oldest `QUARANTINE_BATCH` quarantined entries of a DLQ back onto it, byte for byte,
        as `dlq-bridge redrive QUEUE --quarantine` moves them (one atomic script each)."""
        if self._service.is_kind(source) or names.work_queue(source) is None:
            return await self._done(who, "redrive-quarantine", source, False, f"{source} is not a dead_letter: list")
        outcome = await self.redrive.walk(quarantine_plan(source, limit=QUARANTINE_BATCH), who, "redrive-quarantine")
        message = f"{count(outcome.moved, 'quarantined entry', 'quarantined entries')} pushed back onto " \
                  f"{names.display(source)}"
        return await self._done(who, "redrive-quarantine", source, outcome.moved > 0, message, outcome.moved)

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

    async def retry_all_undeliverable(self, who: str) -> ActionResult:
        """Every record (at most RETRY_ALL_MAX), oldest first, as `dlq-bridge undeliverable retry` does."""
        if self._deliverer is None:
            return await self._done(who, "retry-all", "undeliverable", False, "delivery is not running in this process")
        store = UndeliverableStore(self._redis)
        oldest_first = list(reversed(await store.records()))[:RETRY_ALL_MAX]
        done = await retry_all(oldest_first, self._routes, self._deliverer, store)
        ok = sum(1 for r in done if r.ok)
        failed = {r.message for r in done if not r.ok}
        message = f"{ok} of {len(done)} delivered" + (f"; not: {'; '.join(sorted(failed))[:300]}" if failed else "")
        return await self._done(who, "retry-all", "undeliverable", ok > 0 or not done, message, ok)

    async def discard_undeliverable(self, record_id_: str, who: str) -> ActionResult:
        store = UndeliverableStore(self._redis)
        item = next((s for s in await store.records() if record_id(s) == record_id_), None)
        if item is None or not await store.remove(item):
            return await self._done(who, "discard", record_id_, False, "no such undeliverable record")
        return await self._done(who, "discard", record_id_, True, "discarded", 1)

    # --- silences -------------------------------------------------------------------------

    async def create_silence(self, body: SilenceCreate, who: str) -> SilenceView:
        """Raises SilenceError for a silence without a usable matcher or whose end is not in the future."""
        now = self._clock()
        ends = body.ends_at if body.ends_at is not None else now + (body.duration_s or 3600.0)
        if ends <= now:
            raise SilenceError("ends_at must be in the future")
        author = body.author or who
        if body.label_matchers is not None:
            silence = new_silence(checked(body.label_matchers), now, ends, author=author, comment=body.reason,
                                  webhooks=body.webhooks)
        elif body.queue or body.job_name or body.fingerprint:  # 0.2.0's fields: stored as 0.2.0 stores them
            silence = Silence(id=new_id(), queue=body.queue or None, job_name=body.job_name or None,
                              fingerprint=body.fingerprint or None, starts_at=now, ends_at=ends,
                              reason=body.reason, author=author, webhooks=body.webhooks)
        else:
            raise SilenceError("a silence needs at least one matcher (label_matchers, or queue, job_name, fingerprint)")
        await self._silences.put(silence)
        self._remember(silence)
        await self.audit.append(silence.author, "silence", silence.id, "ok", _describe(silence))
        return silence_view(silence, now)

    async def update_silence(self, silence_id: str, body: SilenceUpdate, who: str) -> SilenceView | None:
        """The silence in force after the edit (a new id when started matchers changed); None: no such silence."""
        now = self._clock()
        ends = body.ends_at if body.ends_at is not None else now + body.duration_s if body.duration_s else None
        if ends is not None and ends <= now:
            raise SilenceError("ends_at must be in the future")
        matchers = checked(body.label_matchers) if body.label_matchers is not None else None
        edit = SilenceEdit(matchers=matchers, ends_at=ends, comment=body.reason, webhooks=body.webhooks)
        done = await self._silences.update(silence_id, edit, who)
        if done is None:
            await self._done(who, "edit-silence", silence_id, False, "no such silence")
            return None
        kept, replaced = done
        for silence in (kept, replaced):
            if silence is not None:
                self._remember(silence)
        note = f"replaced by {kept.id}: " if replaced is not None else ""
        await self.audit.append(who, "edit-silence", silence_id, "ok", note + _describe(kept))
        return silence_view(kept, now)

    async def comment_silence(self, silence_id: str, text: str, who: str) -> SilenceView | None:
        found = await self._silences.comment(silence_id, who, text)
        if found is None:
            return None
        await self.audit.append(who, "comment-silence", silence_id, "ok", text[:200])
        return silence_view(found, self._clock())

    async def expire_silence(self, silence_id: str, who: str) -> ActionResult:
        ended = await self._silences.expire(silence_id, who)
        if ended is None:
            return await self._done(who, "expire-silence", silence_id, False, "no such silence")
        self._remember(ended)
        return await self._done(who, "expire-silence", silence_id, True, "expired", 1)

    def _remember(self, silence: Silence) -> None:
        if self._silence_filter is not None:
            self._silence_filter.remember(silence)


def checked(matchers: list[Matcher]) -> list[Matcher]:
    """`matchers` when a silence may hold them (at least one, one not matching ""), else SilenceError."""
    try:
        return list(MatcherSet(matchers=matchers).matchers)
    except ValidationError as exc:
        raise SilenceError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from None


def _notes(outcome: Outcome) -> str:
    note = f"; resolves queued for {', '.join(sorted(outcome.resolved))}" if outcome.resolved else ""
    if outcome.staged:
        note += f"; also pushed {outcome.staged} entries an interrupted redrive left in staging"
    return note


def _describe(silence: Silence) -> str:
    text = ", ".join(str(m) for m in silence.shown_matchers()) + (" (webhooks too)" if silence.webhooks else "")
    return f"{text}: {silence.reason}" if silence.reason else text
