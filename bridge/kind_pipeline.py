"""The claim loop of one kind source: claim → intake → summarize → hand-off → ack.

Each configured kind (Sidekiq, BullMQ, RQ, Redis Streams, RabbitMQ, SQS) gets one `KindDrain`
next to the list claimer; both share the pipeline's worker slots, so `sources.concurrency`
bounds all in-flight work (docs/design.md, section 2b). A record is acknowledged at its source
(the watched cursor advanced, XACK, basic.ack, DeleteMessage) only after the hand-off returned:
its alert is then durably in the outbox. A crash between the two repeats the alert, and the
delivery ledger stops the second send. Claim counting, quarantine lists and the reaper belong
to the list source; a kind relies on its own lease or redelivery.

A source that cannot be read (its broker down, refused, bad credentials) shows as the `/healthz`
check `source:<name>` failing with a short reason (the error's class and kind, never its text,
which may hold a URL) and `dlq_bridge_source_up{source} 0`, until a claim answers again. A watched
source also runs its leave check: alerted jobs that left the store by hand get their PagerDuty
incident resolved (`bridge.sources.leaving`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bridge import keys
from bridge.errors import REDIS_ERRORS
from bridge.health import Status
from bridge.intake import prepare
from bridge.models import DeadLetter
from bridge.offloop import DeadlineExceeded
from bridge.quarantine import quarantine_alert, quarantine_title
from bridge.settings import SourcesSettings
from bridge.sources.base import entry_digest
from bridge.sources.kinds import KindRecord, KindSource
from bridge.sources.leaving import LeaveNote, leave_note
from bridge.sources.watched import WatchedSource

if TYPE_CHECKING:
    from bridge.pipeline import Pipeline

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 5.0
IDLE_PAUSE_S = (0.05, 1.0)  # an empty source is polled again after this, doubling while it stays empty


def kind_of(source_key: str) -> str:
    """`sidekiq:dead` → `sidekiq`."""
    return source_key.split(":", 1)[0]


def kind_intake(record: KindRecord, settings: SourcesSettings) -> DeadLetter:
    """The envelope of one kind record: route queue = the record's own queue, never the payload's."""
    letter = prepare(record.raw, keys.display(record.source_key), settings)
    return letter.model_copy(update={"queue": record.queue, "source_kind": kind_of(record.source_key)})


class KindDrain:
    """Claims from one kind source until `stop` (or, in burst mode, until it is empty)."""

    def __init__(self, source: KindSource, pipeline: Pipeline) -> None:
        self.source = source
        self._pipeline = pipeline
        self._delay = 0.1

    async def run(self, stop: asyncio.Event, burst: bool) -> None:
        checker = None
        if isinstance(self.source, WatchedSource) and not burst:
            checker = asyncio.create_task(self._leave_checks(self.source, stop))
        try:
            await self._drain(stop, burst)
        finally:
            if checker is not None:
                checker.cancel()
                await asyncio.gather(checker, return_exceptions=True)

    async def _drain(self, stop: asyncio.Event, burst: bool) -> None:
        pipeline = self._pipeline
        idle = IDLE_PAUSE_S[0]
        while await pipeline.acquire_slot(stop):
            record = await self._claim()
            if record is None:
                pipeline.release_slot()
                if burst:
                    return
                await _pause(stop, idle)  # SQS bills each receive: an idle source is asked less often
                idle = min(idle * 2, IDLE_PAUSE_S[1])
                continue
            idle = IDLE_PAUSE_S[0]
            pipeline.track(asyncio.create_task(self._process_and_release(record)))

    async def _claim(self) -> KindRecord | None:
        try:
            record = await self.source.claim()
        except Exception as exc:  # any client library: wait it out, never crash the service
            reason = why_unreadable(exc)
            log.warning("source %s unavailable (%s); retrying", self.source.name, reason)
            self._show_up(False, f"cannot read: {reason}")
            await asyncio.sleep(self._delay)
            self._delay = min(self._delay * 2, MAX_BACKOFF_S)
            return None
        self._delay = 0.1
        self._show_up(True, "readable")
        return record

    def _show_up(self, up: bool, detail: str) -> None:
        name = self.source.name
        check = self._pipeline.health.get(f"source:{name}")
        if check is None or (check.status is Status.OK) != up or check.detail != detail:
            self._pipeline.health.set(f"source:{name}", Status.OK if up else Status.FAILING, detail)
            self._pipeline.metrics.source_up.labels(keys.display(name)).set(1 if up else 0)

    async def _leave_checks(self, source: WatchedSource, stop: asyncio.Event) -> None:
        """Every `leave_check_s`: held jobs gone from the store get their resolve queued."""
        handoff = self._pipeline.handoff
        while not stop.is_set():
            try:
                queued = await source.check_leaving(handoff.forward_parcel)
                for reason, count in queued.items():
                    self._pipeline.metrics.resolves_queued.labels(keys.display(source.name), reason).inc(count)
                if queued:
                    log.info("source %s: %d alerted jobs left the store by hand; resolves queued",
                             source.name, queued.total())
            except Exception as exc:  # the next check goes on; claim errors show on /healthz
                log.warning("source %s: leave check failed (%s)", source.name, why_unreadable(exc))
            await _pause(stop, source.leave_check_s)

    async def _process_and_release(self, record: KindRecord) -> None:
        started = time.monotonic()
        try:
            note = await self._process_until_done(record, started)
            await self._ack(record, note)
        finally:
            self._pipeline.release_slot()

    async def _process_until_done(self, record: KindRecord, started: float) -> LeaveNote | None:
        """Redis outages are waited out; any other error is recorded (like a list entry's), then acked."""
        delay = 0.1
        while True:
            try:
                try:
                    return await self.process(record, started)
                except REDIS_ERRORS:
                    raise
                except Exception as exc:
                    log.exception("pipeline error on a record of %s; recording it", self.source.name)
                    await self._pipeline.record_error(record.source_key, entry_digest(record.raw), exc)
                return None
            except REDIS_ERRORS as exc:  # not handed off yet: the record is still ours (lease, unacked)
                log.warning("record of %s not handed off (%s); retrying", self.source.name, type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    async def _ack(self, record: KindRecord, note: LeaveNote | None) -> None:
        """After the hand-off; a failed ack leaves the record to its lease or redelivery (ledger dedupes).

        A watched record alerted to a resolving sink is held with `note` in the same step.
        """
        try:
            if isinstance(self.source, WatchedSource):
                acked = await self.source.ack_held(record.receipt, note)
            else:
                acked = await self.source.ack(record.receipt)
            if not acked:
                log.info("a record of %s was no longer ours when acknowledged", self.source.name)
        except Exception as exc:
            log.warning("acknowledging a record of %s failed (%s); it will come back", self.source.name,
                        type(exc).__name__)

    async def process(self, record: KindRecord, started: float) -> LeaveNote | None:
        """One record up to its hand-off (its acknowledgement follows in the caller).

        Returns what resolves its alert when the job leaves a watched store (None: nothing to resolve).
        """
        pipeline = self._pipeline
        try:
            letter = await pipeline.run_intake(functools.partial(kind_intake, record, pipeline.settings))
        except DeadlineExceeded:
            await self._static_alert(record, started)
            return None
        alert = await pipeline.alert_for(letter)
        routes = pipeline.dispatcher.routed(alert)
        await pipeline.handoff.finish_kind(self.source.name, record.raw, alert, [r.sink.name for r in routes])
        pipeline.count("poison" if letter.parse_error else "alerted", started)
        return leave_note(alert, routes)

    async def _static_alert(self, record: KindRecord, started: float) -> None:
        """Intake ran past its deadline: a static alert, handed off and archived like any record's
        (never sent from the drain); the record is then acknowledged, and its own store keeps it."""
        pipeline = self._pipeline
        title = quarantine_title(1, pipeline.settings.entry_deadline_s)
        severity = pipeline.severity.for_queue(record.queue)
        alert = quarantine_alert(record.source_key, entry_digest(record.raw), severity, title, record.raw)
        log.error("an entry of %s ran past the intake deadline", self.source.name)
        routes = [route.sink.name for route in pipeline.dispatcher.routed(alert)]
        await pipeline.handoff.finish_kind(self.source.name, record.raw, alert, routes)
        pipeline.count("quarantined", started)


def why_unreadable(exc: BaseException) -> str:
    """`ConnectionError (connection refused)`: the error's class and what kind of failure it is.

    Never the error's text: client libraries put URLs (and so passwords) into their messages.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 5:  # the error and what caused it
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for kind, test in _FAILURE_KINDS:
        if any(test(e, type(e).__name__.lower()) for e in chain):
            return f"{type(exc).__name__} ({kind})"
    return f"{type(exc).__name__} (unavailable)"


_FAILURE_KINDS: list[tuple[str, Callable[[BaseException, str], bool]]] = [
    ("authentication failed", lambda e, n: any(w in n for w in ("auth", "accessrefused", "credential", "denied"))),
    ("connection refused", lambda e, n: isinstance(e, ConnectionRefusedError) or n.endswith("refusederror")),
    ("timed out", lambda e, n: isinstance(e, TimeoutError) or "timeout" in n),
    ("host not found", lambda e, n: isinstance(e, socket.gaierror)),
    ("cannot connect", lambda e, n: isinstance(e, OSError) or "connection" in n),
]


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return
