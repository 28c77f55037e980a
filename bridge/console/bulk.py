"""Bulk actions on a search snapshot: redrive, discard or silence the cause of exactly what a page showed.

A search page answers a `snapshot` (the score of its newest match; bridge.console.search).
`POST /api/v1/bulk` with an action and that filter (its `as_of` = the snapshot) fixes the set:
every match scored at or below `as_of` that is still in a list source's archive (redrive:
one with a work queue), at most BULK_MAX, or for `silence` the distinct fingerprints of the
matches. Entries handed off later score higher, so they are never part of it. The set is
stored (`dlq_bridge:console:bulk:{<id>}` hash + `…:items` list, 24 h) and the answer is its
count, for the page to ask for confirmation.

`POST /api/v1/bulk/<id>/run?batch=N` does the next N items and answers the progress; the page
calls it until `state` is `done` (or the user presses cancel: `POST …/cancel`). One run at a
time per bulk action (a lease, `…:lease`, 15 s). Per item, before acting, it is added to
`…:tried`; a redrive or discard then moves/removes the archived bytes with one atomic script
each (the one redrive operation, bridge.redrive.operation; LREM). After a crash (the process killed between the move
and the progress write), the next run does the same items again: one already tried and no
longer in the archive counts as done by the interrupted run, and an entry whose record index
now scores above `as_of` (the same bytes parked again after the snapshot) is skipped, so
nothing is redriven twice. A redrive queues the resolves as a single redrive does (the same operation).
A selection (`entries`: the rows a reader ticked in a compact table, at most SELECT_MAX) is a
snapshot too: its items are those entries still archived, `as_of` the page's own time, and it
runs, audits and resumes as above. The audit list gets one record when a bulk action starts and one when it ends or is
cancelled, each with its counts. Roles: as the single actions (redrive and silence:
operator; discard of archived entries: admin).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any, Literal

import redis.asyncio as redis
from pydantic import BaseModel, ConfigDict, Field

from bridge.console.actions import ConsoleActions
from bridge.console.export import describe
from bridge.console.search import SearchFilter
from bridge.console.service import ConsoleService
from bridge.console.views import SilenceCreate
from bridge.core import names
from bridge.stores.bulk_jobs import BulkJobs
from bridge.stores.search_index import record_act
from bridge.stores.silences import SilenceStore

BULK_MAX = 10_000
BATCH_DEFAULT = 100
BATCH_MAX = 1000
PAGE = 100
SELECT_MAX = 500
ARCHIVE_CHUNK = 1000
Action = Literal["redrive", "discard", "silence"]
State = Literal["ready", "running", "done", "cancelled"]
NEEDS: dict[str, str] = {"redrive": "redrive", "discard": "discard-entry", "silence": "silence"}  # roles.NEEDS


class EntryRef(BaseModel):
    """One chosen entry: its source and id (raw digest)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=512)
    id: str = Field(pattern=r"^[0-9a-f]{16}$")


class BulkCreate(BaseModel):
    """A bulk action on the matches of `filter` as of `filter.as_of` (a search page's `snapshot`), or, with
    `entries`, on those chosen entries as of `filter.as_of` (the page's time, in ms)."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    filter: SearchFilter
    entries: list[EntryRef] = Field(default=[], max_length=SELECT_MAX,
                                    description="Chosen entries (a table's ticked rows) instead of every match.")
    duration_s: float = Field(default=3600.0, gt=0, le=366 * 24 * 3600, description="silence: how long.")
    reason: str = Field(default="", max_length=1000, description="silence: why.")


class BulkView(BaseModel):
    id: str
    action: Action
    who: str
    filter: str = Field(description="The filter as the audit list shows it, with its as_of.")
    as_of: str
    total: int = Field(description="Items in the snapshot (entries; for silence, causes).")
    processed: int
    done: int = Field(description="Entries redriven or discarded, or silences created.")
    skipped: int = Field(description="Gone from the archive meanwhile, or parked again after the snapshot.")
    state: State
    created_at: float


class BulkError(ValueError):
    """A bulk action that cannot be made or run: 404 unknown id, else 409 (no snapshot, nothing matched, busy)."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class BulkActions:
    """Stateless: every bulk action lives in Redis, so any replica (or a restarted one) runs it on."""

    def __init__(self, service: ConsoleService, actions: ConsoleActions, client: redis.Redis,
                 clock: Any = time.time) -> None:
        self._service = service
        self._actions = actions
        self._redis = client
        self._jobs = BulkJobs(client)
        self._clock = clock

    # --- the snapshot -----------------------------------------------------------------------

    async def create(self, body: BulkCreate, who: str) -> BulkView:
        f = body.filter
        if not f.as_of:
            raise BulkError("a bulk action needs filter.as_of: the snapshot of the page it acts on")
        if body.entries:
            matches = await self._chosen(body.entries)
        else:
            matches = await self._matches(f.model_copy(update={"before": "", "limit": PAGE}))
        if body.action == "silence":
            items = list(dict.fromkeys(fp for _s, _d, fp in matches if fp))
        else:
            items = await self._in_archive(matches, redrive=body.action == "redrive")
        if not items:
            raise BulkError("nothing in the snapshot to act on (no match still in an archive)")
        bulk_id = secrets.token_hex(8)
        described = f"{len(body.entries)} chosen entries" if body.entries else describe(f)
        view = BulkView(id=bulk_id, action=body.action, who=who, filter=described, as_of=f.as_of,
                        total=len(items), processed=0, done=0, skipped=0, state="ready", created_at=self._clock())
        meta: dict[Any, Any] = {**{k: str(v) for k, v in view.model_dump(exclude={"state"}).items()}, "state": "ready",
                "duration_s": str(body.duration_s), "reason": body.reason}
        await self._jobs.create(bulk_id, meta, items)
        return view

    async def _matches(self, f: SearchFilter) -> list[tuple[str, str, str]]:
        """(source, digest, fingerprint) of every match at or below `as_of`, newest first, ≤ BULK_MAX + 1."""
        found: list[tuple[str, str, str]] = []
        while len(found) <= BULK_MAX:
            page = await self._service.search(f)
            found += [(e.source, e.id, e.envelope.fingerprint or "") for e in page.entries]
            if page.next_before is None:
                break
            f = f.model_copy(update={"before": page.next_before})
        if len(found) > BULK_MAX:
            raise BulkError(f"the snapshot matches more than {BULK_MAX} entries: narrow the filter")
        return found

    async def _chosen(self, chosen: Sequence[EntryRef]) -> list[tuple[str, str, str]]:
        """(source, digest, fingerprint) of the chosen entries (the fingerprint from each one's record)."""
        unique = list(dict.fromkeys((ref.source, ref.id) for ref in chosen))
        found = []
        for source, digest in unique:
            record = await self._service.record(source, digest)
            alert = record.alert if record is not None else None
            found.append((source, digest, alert.dead_letter.fingerprint if alert is not None else ""))
        return found

    async def _in_archive(self, matches: Sequence[tuple[str, str, str]], redrive: bool) -> list[str]:
        """Items `source\\tdigest` of the matches still archived in a list source (redrive: with a work queue)."""
        wanted: dict[str, list[str]] = {}
        for source, digest, _fp in matches:
            if self._service.is_kind(source) or (redrive and names.work_queue(source) is None):
                continue
            wanted.setdefault(source, []).append(digest)
        items = []
        for source, digests in wanted.items():
            present = await self._archived(source, set(digests))
            items += [f"{source}\t{d}" for d in digests if d in present]
        return items

    async def _archived(self, source: str, digests: set[str]) -> dict[str, bytes]:
        """digest → archived bytes, for those of `digests` in the source's archive (one scan)."""
        return await self._service.archive.find_raws(source, digests, None, ARCHIVE_CHUNK)

    # --- progress -----------------------------------------------------------------------------

    async def view(self, bulk_id: str) -> BulkView | None:
        meta = await self._meta(bulk_id)
        return None if meta is None else _view(meta)

    async def _meta(self, bulk_id: str) -> dict[str, str] | None:
        return await self._jobs.meta(bulk_id)

    async def cancel(self, bulk_id: str, who: str) -> BulkView:
        meta = await self._meta(bulk_id)
        if meta is None:
            raise BulkError("no such bulk action", 404)
        if meta["state"] in ("ready", "running"):
            await self._jobs.set_state(bulk_id, "cancelled")
            meta["state"] = "cancelled"
            await self._actions.audit.append(who, f"bulk-{meta['action']}", _target(meta), "cancelled",
                                             _counts(meta))
        return _view(meta)

    # --- one batch ------------------------------------------------------------------------------

    async def run(self, bulk_id: str, who: str, batch: int = BATCH_DEFAULT) -> BulkView:
        """The next `batch` items; safe to call again after a crash (see module doc)."""
        owner = secrets.token_hex(8)
        if not await self._jobs.take_lease(bulk_id, owner):
            raise BulkError("this bulk action is running elsewhere; try again in a moment")
        try:
            meta = await self._meta(bulk_id)
            if meta is None:
                raise BulkError("no such bulk action", 404)
            if meta["state"] in ("done", "cancelled"):
                return _view(meta)
            if meta["state"] == "ready":
                await self._jobs.set_state(bulk_id, "running")
                await self._actions.audit.append(who, f"bulk-{meta['action']}", _target(meta), "started",
                                                 f"{meta['total']} {_noun(meta)} in the snapshot")
            start = int(meta["processed"])
            items = await self._jobs.items(bulk_id, start, min(max(batch, 1), BATCH_MAX))
            done, skipped = await self._do(meta, bulk_id, items)
            await self._jobs.count(bulk_id, len(items), done, skipped)
            meta = await self._meta(bulk_id) or meta
            if int(meta["processed"]) >= int(meta["total"]) and meta["state"] == "running":
                await self._jobs.set_state(bulk_id, "done")
                meta["state"] = "done"
                await self._actions.audit.append(who, f"bulk-{meta['action']}", _target(meta), "ok", _counts(meta))
            return _view(meta)
        finally:
            await self._jobs.drop_lease(bulk_id, owner)

    async def _do(self, meta: dict[str, str], bulk_id: str, items: list[str]) -> tuple[int, int]:
        before = await self._jobs.tried_before(bulk_id, items)
        if meta["action"] == "silence":
            return await self._silence(meta, items, before)
        return await self._entries(meta, items, before)

    async def _entries(self, meta: dict[str, str], items: list[str], before: set[str]) -> tuple[int, int]:
        by_source: dict[str, list[str]] = {}
        for item in items:
            source, _, digest = item.rpartition("\t")  # a digest has no tab; a source name might
            by_source.setdefault(source, []).append(digest)
        done = skipped = 0
        for source, digests in by_source.items():
            present = await self._archived(source, set(digests))
            scores = await self._service.archive.scores(source, digests)
            act = []
            for digest, score in zip(digests, scores, strict=True):
                if digest in present and (score is None or float(score) <= float(meta["as_of"])):
                    act.append(digest)
                elif f"{source}\t{digest}" in before and digest not in present:
                    done += 1  # an interrupted run of this bulk action moved it
                else:
                    skipped += 1
            moved = await self._act(meta["action"], source, [present[d] for d in act], act, meta["who"])
            done, skipped = done + moved, skipped + len(act) - moved
        return done, skipped

    async def _act(self, action: str, source: str, raws: list[bytes], digests: list[str], who: str) -> int:
        if not raws:
            return 0
        if action == "discard":
            removed = await self._service.archive.discard(source, raws)
            for digest, n in zip(digests, removed, strict=True):
                if n:
                    await record_act(self._redis, source, digest, who, "bulk-discard", self._clock())
            return sum(removed)
        if names.work_queue(source) is None:
            return 0
        found = dict(zip(digests, raws, strict=True))
        return (await self._actions.redrive.move_found(source, found, who, "bulk-redrive")).moved

    async def _silence(self, meta: dict[str, str], items: list[str], before: set[str]) -> tuple[int, int]:
        now = self._clock()
        active = {s.fingerprint for s in await SilenceStore(self._redis, self._clock).all() if s.active(now)}
        done = skipped = 0
        for fp in items:
            if fp in before and fp in active:
                done += 1  # an interrupted run created it
                continue
            reason = meta.get("reason") or f"bulk silence of {meta['filter']}"
            await self._actions.create_silence(SilenceCreate(fingerprint=fp, duration_s=float(meta["duration_s"]),
                                                             reason=reason, author=meta["who"]), meta["who"])
            done += 1
        return done, skipped


def _view(meta: dict[str, str]) -> BulkView:
    return BulkView(id=meta["id"], action=meta["action"], who=meta["who"], filter=meta["filter"],
                    as_of=meta["as_of"], total=int(meta["total"]), processed=int(meta["processed"]),
                    done=int(meta["done"]), skipped=int(meta["skipped"]), state=meta["state"],
                    created_at=float(meta["created_at"]))


def _noun(meta: dict[str, str]) -> str:
    return "causes" if meta["action"] == "silence" else "entries"


def _target(meta: dict[str, str]) -> str:
    return f"{meta['id']}: {meta['filter']}"


def _counts(meta: dict[str, str]) -> str:
    verb = {"redrive": "redriven", "discard": "discarded", "silence": "silenced"}[meta["action"]]
    return (f"{meta['done']} of {meta['total']} {_noun(meta)} {verb}, {meta['skipped']} skipped "
            f"(gone from the archive or parked again after the snapshot); {meta['processed']} processed")
