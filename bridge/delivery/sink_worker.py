"""Per-sink delivery workers: each sink drains its own queue at its own pace.

A `SinkWorker` takes leased items from its `SinkQueue` (most urgent, then
oldest first) and hands them to `concurrency` long-lived handler tasks (not a
task per item), which, per item, either deliver the alert (`group_by = "none"`)
or add it to the sink's `Grouper`, then ack it. For a grouped sink a second
loop claims due group notifications and delivers them. A killed replica's
leased items come back when the lease runs out; the ledger stops a second
send (docs/design.md, section 5b).

`DeliverySupervisor` (bridge/delivery/supervisor.py) runs every sink's worker, the outbox
sweep and the queue monitor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

from pydantic import ValidationError

from bridge.clients.batching import flush_while_busy
from bridge.core.errors import REDIS_ERRORS
from bridge.core.formats import RecordFormat, format_of
from bridge.core.models import Alert, Notification
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.downgrade import downgrade
from bridge.delivery.resolve import Resolve, parse_resolve
from bridge.delivery.send import ResolveSink, Route
from bridge.sinks.sink_registry import SINKS
from bridge.stores.groups import Grouper as FleetGrouper
from bridge.stores.groups import group_key_of
from bridge.stores.ledger import Ledger, resolve_key
from bridge.stores.sink_queue import SinkQueue, Taken
from bridge.stores.undeliverable_records import UndeliverableStore, unreadable_record

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.25
ACK_DELAY_S = 0.005
GROUP_POLL_S = 0.5
ERROR_PAUSE_S = 1.0


class Grouper(Protocol):
    """The grouping state a grouped sink's worker uses (`bridge.stores.groups`, section 5b)."""

    async def add(self, alert: Alert) -> None: ...

    async def claim_due(self, limit: int) -> Sequence[Notification]: ...

    async def notified(self, notification: Notification, delivered: bool) -> None: ...

    async def renew(self, notification: Notification) -> bool: ...

    async def left(self, group: str, member: str) -> Alert | None: ...

    async def send_now(self) -> list[str]: ...

    async def settled(self, groups: list[str]) -> bool: ...

    @property
    def lease_s(self) -> float: ...


async def pause(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    """Wait for `wake` or `seconds`, whichever comes first (at once when `stop` is set); then clear `wake`.

    No task per pause: the caller makes sure `stop` also sets `wake` (`SinkWorker.run` relays it).
    """
    if not stop.is_set() and not wake.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await wake.wait()
    wake.clear()


class SinkWorker:
    """Delivers one sink's queue with bounded concurrency (see module doc)."""

    def __init__(
        self,
        route: Route,
        queue: SinkQueue,
        dispatcher: Dispatcher,
        *,
        concurrency: int,
        lease_s: float,
        grouper: Grouper | None = None,
        undeliverable: UndeliverableStore | None = None,
        formats: RecordFormat | None = None,
    ) -> None:
        self.route = route
        self._formats = formats or RecordFormat()
        self.queue = queue
        self._dispatcher = dispatcher
        self._concurrency = concurrency
        self._lease_s = lease_s
        self._grouper = grouper
        self._undeliverable = undeliverable
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()  # set (with `_wake`) once `stop` is: the other pauses end
        self._in_flight: set[str] = set()  # ids taken and not finished (queued for a handler or handled)
        self._items: asyncio.Queue[Taken] = asyncio.Queue()
        self._drained = asyncio.Event()  # set whenever nothing is in flight
        self._drained.set()
        self._notifying: set[asyncio.Task[None]] = set()
        self._to_ack: list[str] = []
        self._to_mark: list[str] = []  # ledger keys marked delivered with the next ack
        self._acking: set[str] = set()
        # Ungrouped sinks with a ledger reserve in the take and mark in the ack (bridge/stores/sink_queue.py).
        self._ledger = dispatcher.ledger_for(route) if grouper is None else None
        self._acker: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.route.sink.name

    @property
    def grouper(self) -> Grouper | None:
        return self._grouper

    @property
    def busy(self) -> bool:
        return bool(self._in_flight or self._notifying or self._to_ack or self._acking)

    def nudge(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`; then finish what is in flight. Cancelled: unfinished leases go back."""
        self._stopping.clear()
        loops = [self._relay_stop(stop), self._take_loop(stop), self._renew_loop(stop)]
        if self._grouper is not None:
            loops.append(self._notify_loop(stop, self._grouper))
        tasks = [asyncio.create_task(loop) for loop in loops]
        handlers = [asyncio.create_task(self._handle_items()) for _ in range(self._concurrency)]
        try:
            await asyncio.gather(*tasks)
            await self._drained.wait()
            await asyncio.gather(*self._notifying, return_exceptions=True)
        finally:
            await self._cancel([*tasks, *handlers])

    async def _cancel(self, loops: list[asyncio.Task[None]]) -> None:
        unfinished = list(self._in_flight)
        pending = [*loops, *self._notifying]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._items = asyncio.Queue()  # items no handler started go back with the others, not to a later run
        self._in_flight.clear()
        self._drained.set()
        with contextlib.suppress(*REDIS_ERRORS):
            await asyncio.shield(self._flush_acks())
            if unfinished:
                await asyncio.shield(self.queue.release(unfinished))

    async def _relay_stop(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._stopping.set()
        self._wake.set()

    async def _take_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            free = self._concurrency - len(self._in_flight)
            if free <= 0:
                await pause(stop, self._wake, IDLE_POLL_S)
                continue
            try:
                reserve = self._ledger.reserve_spec(self.name) if self._ledger is not None else None
                taken = await self.queue.take(free, reserve=reserve)
            except REDIS_ERRORS as exc:
                log.warning("sink %s: queue take failed (%s); retrying", self.name, type(exc).__name__)
                await pause(stop, self._stopping, ERROR_PAUSE_S)
                continue
            if not taken:
                await pause(stop, self._wake, IDLE_POLL_S)
            for item in taken:
                self._start(item)

    def _start(self, item: Taken) -> None:
        """Hand a taken item to the handlers: `concurrency` long-lived tasks, not a task per item."""
        self._in_flight.add(item.id)
        self._drained.clear()
        self._items.put_nowait(item)

    async def _handle_items(self) -> None:
        while True:
            item = await self._items.get()
            try:
                await self._handle(item)
            finally:
                self._in_flight.discard(item.id)
                self._wake.set()  # a slot is free
                if not self._in_flight:
                    self._drained.set()

    async def _handle(self, item: Taken) -> None:
        if item.state == "duplicate":  # already in the ledger: the take dropped it
            log.info("sink %s: %s already delivered (ledger)", self.name, item.id)
            self._dispatcher.count_duplicate(self.route)
            return
        found = format_of(item.body)
        if found > self._formats.reads:
            await self._leave_newer(item, found)
            return
        resolve = parse_resolve(item.body)
        if resolve is not None:
            await self._handle_resolve(item, resolve)
            return
        try:
            alert = Alert.model_validate_json(item.body)
        except (ValidationError, ValueError):
            await self._unreadable(item)
            return
        try:
            mark = None
            if self._grouper is not None:
                await self._grouper.add(alert)
            else:
                token = item.token if item.state == "reserved" else None
                result = await self._dispatcher.deliver_one(
                    self.route, alert, token=token, mark_later=self._ledger is not None
                )
                mark = result.mark
            self._ack_soon(item.id, mark)
        except REDIS_ERRORS as exc:  # stays leased: taken again when the lease runs out
            log.warning("sink %s: outcome of %s not recorded (%s); it will be retried",
                        self.name, alert.idempotency_key, type(exc).__name__)
        except Exception:
            log.exception("sink %s: delivery error on %s; it will be retried", self.name, alert.idempotency_key)

    async def _handle_resolve(self, item: Taken, resolve: Resolve) -> None:
        """Send a resolve where it applies (a PagerDuty sink with `resolve_on_retry`), else drop it.

        A take with reservations already holds the resolve's ledger key (`item.token`): the send
        uses it; a resolve this sink does not send gives it back.
        """
        token = item.token if item.state == "reserved" else None
        try:
            sink = self.route.sink
            sendable = await self._resolves(sink, resolve) if isinstance(sink, ResolveSink) else None
            if isinstance(sink, ResolveSink) and sendable is not None:
                await self._dispatcher.deliver_resolve(self.route, sink, sendable, token=token)
            elif token is not None and self._ledger is not None:
                await self._ledger.release(resolve_key(self.name, resolve), token)
            self._ack_soon(item.id)
        except REDIS_ERRORS as exc:  # stays leased: taken again when the lease runs out
            log.warning("sink %s: resolve of %s not recorded (%s); it will be retried",
                        self.name, resolve.idempotency_key, type(exc).__name__)
        except Exception:
            log.exception("sink %s: error on the resolve of %s; it will be retried", self.name, resolve.idempotency_key)

    async def _resolves(self, sink: ResolveSink, resolve: Resolve) -> Resolve | None:
        """The resolve this sink sends, or None; a grouped sink sends the group's once all its jobs left."""
        settings = self.route.settings
        if not SINKS.of(settings).resolves(settings):
            return None
        if self._grouper is None or settings.group_by == "none":
            return resolve
        if (settings.group_by == "queue" and not resolve.queue) or (settings.group_by == "cause" and not resolve.cause):
            return None  # an enqueuer that did not say which group: the group is unknown
        group = group_key_of(settings.group_by, resolve.fingerprint, resolve.queue, resolve.idempotency_key,
                             cause=resolve.cause, severity=resolve.severity.value)
        first = await self._grouper.left(group, resolve.idempotency_key)
        if first is not None:
            return resolve.model_copy(update={"dedup_key": sink.group_dedup_key(first)})
        log.info("sink %s: %s left, its group's incident stays open (other jobs in it)",
                 self.name, resolve.idempotency_key)
        return None

    def _ack_soon(self, item: str, mark: str | None = None) -> None:
        """Acks (and ledger marks) of items finished within a few ms go out as one script call.

        The acker is its own task: a cancelled delivery never cancels the mark of a send that
        succeeded. A crash before the flush leaves the item leased and its reservation in place:
        it is taken again after the lease and sent again with the same Idempotency-Key once the
        reservation expires, as for a crash between a send and its mark.
        """
        self._to_ack.append(item)
        if mark is not None:
            self._to_mark.append(mark)
        if self._acker is None or self._acker.done():
            self._acker = asyncio.create_task(flush_while_busy(lambda: bool(self._to_ack), self._flush_logged,
                                                               ACK_DELAY_S))

    async def _flush_logged(self) -> None:
        try:
            await self._flush_acks()
        except REDIS_ERRORS as exc:  # still leased: taken again after the lease; the ledger stops a resend
            log.warning("sink %s: ack failed (%s); those items will be retried", self.name, type(exc).__name__)

    async def _flush_acks(self) -> None:
        batch, self._to_ack = self._to_ack, []
        marks, self._to_mark = self._to_mark, []
        self._acking.update(batch)
        try:
            ledger = self._ledger
            if marks and ledger is not None:
                await self.queue.ack(*batch, marks=marks, mark_value=ledger.mark_value(), ttl_s=ledger.ttl_s)
            else:
                await self.queue.ack(*batch)
        finally:
            self._acking.difference_update(batch)

    async def _unreadable(self, item: Taken) -> None:
        """An item this version cannot read although its format is one it reads (a bug or a hand-made
        item): kept whole as an undeliverable record, which `undeliverable retry` puts back in this
        sink's queue; then dropped from the queue."""
        log.error("sink %s: unreadable queued alert %s; recorded as undeliverable", self.name, item.id)
        record = unreadable_record(self.name, item.id, item.body)
        with contextlib.suppress(*REDIS_ERRORS):
            if self._undeliverable is not None:
                await self._undeliverable.push(record)
            await self.queue.ack(item.id)

    async def _leave_newer(self, item: Taken, found: int) -> None:
        """An item of a record format newer than this replica reads: never acked or dropped, but left
        for a replica that reads it (bridge.core.formats); a reservation the take made goes back."""
        log.warning("sink %s: queued item %s is of record format %d (this replica reads up to %d); "
                    "left for a newer replica", self.name, item.id, found, self._formats.reads)
        with contextlib.suppress(*REDIS_ERRORS):
            if item.state == "reserved" and self._ledger is not None:
                await self._ledger.release(Ledger.item_key(self.name, item.id), item.token)
            await self.queue.leave_newer(item.id, found)
        self._dispatcher.count_newer(self.route)

    async def _renew_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await pause(stop, self._stopping, self._lease_s / 3)
            try:
                await self.queue.renew([*self._in_flight, *self._to_ack, *self._acking])
            except REDIS_ERRORS as exc:
                log.warning("sink %s: lease renewal failed (%s)", self.name, type(exc).__name__)
            await self.downgrade()

    async def downgrade(self) -> None:
        """While an older replica is live: this sink's records it cannot read, rewritten for it."""
        groups = self._grouper if isinstance(self._grouper, FleetGrouper) else None
        try:
            await downgrade(self.queue, groups, self._formats)
        except REDIS_ERRORS as exc:
            log.warning("sink %s: rewriting records for an older replica failed (%s); retried",
                        self.name, type(exc).__name__)

    async def _notify_loop(self, stop: asyncio.Event, grouper: Grouper) -> None:
        while not stop.is_set():
            free = self._concurrency - len(self._notifying)
            due: Sequence[Notification] = []
            try:
                due = await grouper.claim_due(free) if free > 0 else []
            except REDIS_ERRORS as exc:
                log.warning("sink %s: group claim failed (%s); retrying", self.name, type(exc).__name__)
            for notification in due:
                task = asyncio.create_task(self._notify(grouper, notification))
                self._notifying.add(task)
                task.add_done_callback(self._notifying.discard)
            if not due:
                await pause(stop, self._stopping, GROUP_POLL_S)

    async def _notify(self, grouper: Grouper, notification: Notification) -> None:
        keeper = asyncio.create_task(self._keep_group(grouper, notification))
        try:
            result = await self._dispatcher.deliver_group(self.route, notification)
            await grouper.notified(notification, result.outcome != "undeliverable")
        except REDIS_ERRORS as exc:  # the group's lease runs out and another claim repeats it
            log.warning("sink %s: group outcome not recorded (%s)", self.name, type(exc).__name__)
        finally:
            keeper.cancel()

    async def _keep_group(self, grouper: Grouper, notification: Notification) -> None:
        """Renew the group's lease while its notification is still retrying (a slow receiver)."""
        while True:
            await asyncio.sleep(grouper.lease_s / 3)
            try:
                if not await grouper.renew(notification):
                    return
            except REDIS_ERRORS as exc:
                log.warning("sink %s: group lease renewal failed (%s)", self.name, type(exc).__name__)
