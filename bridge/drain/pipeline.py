"""The drain: one loop for every source, and the chain every dead letter goes through.

The chain, in `Pipeline.process` (each stage one call, in this order):

    claim        bridge/sources/source.py        Source.claim_batch (in `drain`), the plug-in's own claim
    intake       bridge/intake/chain.py        bytes → redacted, fingerprinted DeadLetter, on a thread
                                               under `entry_deadline_s`, through the solo lane
    summarize    bridge/summarize/openclaw_summarizer.py   DeadLetter → Summary (gateway, cache, or fallback) → Alert
    route        bridge/delivery/dispatch.py   the sinks this alert goes to (severity, queue)
    hand-off     bridge/stores/handoff.py      archive + the alert queued for every routed sink, atomically
    acknowledge  bridge/sources/source.py        the source lets the entry go

and then, per sink, on any replica, at the sink's own pace (bridge/delivery/sink_worker.py):
group → ledger → limit → send.

Every source (the `dead_letter:*` lists, each configured kind) is a `bridge.sources.source.Source`;
the same claim loop runs for each, and they share the worker slots (`bridge.drain.slots`), so in-flight
work is bounded by `sources.concurrency`. The hand-off archives the entry and queues its alert for
every routed sink in one step (batched per source); only then is the entry acknowledged at its
source. The sink workers (`bridge.delivery.sink_worker`) deliver at their own pace, so the drain never
waits on a sink. Upkeep (heartbeat, rescan, reap, own-list sweep, leave checks) is `bridge.drain.upkeep`.
Intake runs on daemon threads under `sources.entry_deadline_s`, through the solo lane
(`bridge.drain.solo`: a suspect's intake runs alone). An entry whose solo deaths reached
`sources.quarantine_after`, or whose intake ran past the deadline, is quarantined: a static alert
is handed off as the entry moves, unparsed, to `dlq_bridge:quarantine:<ref>` (docs/design.md, 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from bridge.clients.redis_memory import RedisMemory, is_full_error
from bridge.core import names
from bridge.core.backoff import Backoff
from bridge.core.claimed import Claimed
from bridge.core.errors import REDIS_ERRORS
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, DeadLetter
from bridge.core.offloop import DeadlineExceeded, OffLoop
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.fleet import FleetFormat
from bridge.delivery.supervisor import DeliverySupervisor
from bridge.drain.quarantine import quarantine_alert, quarantine_title
from bridge.drain.seen import record_seen
from bridge.drain.slots import Slots
from bridge.drain.solo import SoloLane
from bridge.drain.upkeep import Upkeep
from bridge.intake.chain import prepare
from bridge.intake.redact import redact_key_name
from bridge.settings import SeveritySettings, SourcesSettings
from bridge.sources.leaving import leave_note
from bridge.sources.source import Source, SourceUnavailable
from bridge.stores.handoff import HandOff
from bridge.stores.search_index import SearchIndex
from bridge.stores.seen_before import SeenBeforeStore
from bridge.stores.trends import TrendCounter
from bridge.stores.undeliverable_records import UndeliverableStore
from bridge.summarize.summarizer import Summarizer

log = logging.getLogger(__name__)

INTAKE_THREADS = 4
CLAIM_BATCH = 16  # entries claimed per script call at most (free worker slots permitting)


def intake(raw: bytes, source_key: str, settings: SourcesSettings) -> DeadLetter:
    """Normalize, redact and fingerprint one entry (runs on an intake thread).

    `source_key` is byte-exact; the envelope gets its display form.
    """
    return prepare(raw, names.display(source_key), settings)


def intake_of(claimed: Claimed, settings: SourcesSettings) -> DeadLetter:
    """The envelope of any claimed entry; a kind record's route queue is the record's, never the payload's."""
    if claimed.origin is None:
        return intake(claimed.raw, claimed.source_key, settings)
    letter = prepare(claimed.raw, names.display(claimed.origin), settings)
    update: dict[str, object] = {"queue": claimed.queue, "source_kind": claimed.origin.split(":", 1)[0]}
    if letter.attempts is None and claimed.attempts is not None:
        update["attempts"] = claimed.attempts
    return letter.model_copy(update=update)


DROP_HEARTBEAT_S = 0.5
CLAIM_ERRORS: tuple[type[Exception], ...] = (*REDIS_ERRORS, SourceUnavailable)


class Pipeline:
    """Drains the DLQs until `stop` is set (or, in burst mode, until they are empty)."""

    def __init__(
        self,
        source: Source,
        summarizer: Summarizer,
        dispatcher: Dispatcher,
        undeliverable: UndeliverableStore,
        settings: SourcesSettings,
        metrics: Metrics,
        health: Health,
        runbook_url: Callable[[str], str | None] = lambda _hint: None,
        severity: SeveritySettings | None = None,
        redis_target: str = "Redis",
        *,
        handoff: HandOff,
        delivery: DeliverySupervisor | None = None,
        kinds: Sequence[Source] = (),
        memory: RedisMemory | None = None,
        fleet: FleetFormat | None = None,
        search_index: SearchIndex | None = None,
        trends: TrendCounter | None = None,  # per queue and cause, for the console's charts
        trace_link: Callable[[str], str | None] = lambda _trace_id: None,
        seen_before: SeenBeforeStore | None = None,
    ) -> None:
        self._sources, self._seen_before = [source, *kinds], seen_before
        self._memory, self._redis_target = memory, redis_target  # the target masked, for the logs
        self._source = source
        self._handoff, self._trends = handoff, trends
        self._delivery, self._undeliverable = delivery, undeliverable
        self._summarizer, self._dispatcher = summarizer, dispatcher
        self._settings, self._metrics, self._health = settings, metrics, health
        self._runbook_url, self._trace_link, self._severity = runbook_url, trace_link, severity or SeveritySettings()
        self._offloop: OffLoop | None = None
        self.search_index = search_index  # trimmed by the upkeep every minute, searched or not
        self._upkeep = Upkeep(self._sources, settings, metrics, health, self._redis_down, search_index, fleet)
        self._slots = Slots(settings.concurrency, self._busy_tick)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._held: Counter[tuple[str, bytes]] = Counter()
        self._lane = SoloLane(source, self._redis_down)
        self.processed = 0
        self.last_tick = time.monotonic()

    async def run(self, stop: asyncio.Event, *, burst: bool = False) -> None:
        """Claim until `stop`; then wait for in-flight entries (the caller bounds the wait).

        The sink workers run alongside; in burst mode the run ends once the DLQs and
        every sink queue are empty.
        """
        self._offloop = OffLoop(INTAKE_THREADS, name="dlq-bridge-intake")
        await self._start()
        delivery_stop = asyncio.Event()
        delivery = asyncio.create_task(self._delivery.run(delivery_stop)) if self._delivery else None
        upkeep = self._upkeep.tasks(stop, self._held, self._handoff.forward_parcel, self._rescan, burst)
        try:
            await asyncio.gather(*(self.drain(source, stop, burst=burst) for source in self._sources))
            await self.drain_in_flight()
            await self._stop_delivery(delivery, delivery_stop, burst)
        finally:
            # Cancelled (grace period over): in-flight entries stay in the processing list.
            leftovers = [*upkeep, *self._in_flight, *([delivery] if delivery else [])]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            self._offloop.close()
            await self._drop_heartbeat()  # leftovers may be reaped at once (also when cancelled)

    async def _drop_heartbeat(self) -> None:
        """Best effort and brief: a stop while Redis is down must not wait on it (it expires anyway)."""
        with contextlib.suppress(*REDIS_ERRORS, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._source.drop_heartbeat()), DROP_HEARTBEAT_S)

    async def _stop_delivery(self, task: asyncio.Task[None] | None, stop: asyncio.Event, burst: bool) -> None:
        """Burst mode first waits for empty sink queues; then in-flight deliveries finish."""
        if task is None or self._delivery is None:
            return
        if burst:
            await self._delivery.wait_idle()
        stop.set()
        await task

    async def _start(self) -> None:
        backoff = Backoff()
        while True:
            try:
                recovered = await self._upkeep.start()
                await self._rescan()
                break
            except REDIS_ERRORS as exc:
                self._redis_down(exc)
                await backoff.wait()
        if recovered:
            self._metrics.reaped.inc(recovered)
            log.info("returned %d entries from a previous run to their DLQs", recovered)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def drain(self, source: Source, stop: asyncio.Event, *, burst: bool = False) -> None:
        """The one claim loop, run for each source (`Source.claim_batch` waits briefly when idle);
        in burst mode it ends once nothing is in flight and `source` is drained."""
        backoff = Backoff()
        while await self._slots.acquire(stop):
            slots = 1 + await self._slots.take_free(CLAIM_BATCH - 1)
            try:
                batch = await source.claim_batch(slots)
            except CLAIM_ERRORS as exc:
                self._slots.release(slots)
                if not self._unavailable(source, exc) and burst:
                    return
                await backoff.wait()
                continue
            self._tick(source)
            backoff.reset()
            self._slots.release(slots - len(batch))
            if not batch:
                if burst and not self._in_flight and await self._drained(source):
                    return
                continue
            for claimed in sorted(batch, key=lambda c: c.claims):  # suspects: fewest solo deaths first
                self._track(asyncio.create_task(self._process_and_release(claimed, source)))

    def _unavailable(self, source: Source, exc: BaseException) -> bool:
        """Shows why `source` cannot be read; False: a kind's own store (burst mode gives up on it)."""
        if isinstance(exc, SourceUnavailable):
            log.warning("source %s unavailable (%s); retrying", source.name, exc.reason)
            self._show_source(source, False, f"cannot read: {exc.reason}")
            return False
        self._redis_down(exc)
        return True

    def _show_source(self, source: Source, up: bool, detail: str) -> None:
        """`/healthz` check `source:<name>` and `dlq_bridge_source_up{source}`, set when they change."""
        name = source.health_check
        check = self._health.get(name) if name else None
        if name and (check is None or (check.status is Status.OK) != up or check.detail != detail):
            self._health.set(name, Status.OK if up else Status.FAILING, detail)
            self._metrics.source_up.labels(names.display(source.name)).set(1 if up else 0)

    def _busy_tick(self) -> None:  # no free slot for a second: the loop still lives
        self.last_tick = time.monotonic()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def drain_in_flight(self) -> None:
        if self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def _drained(self, source: Source) -> bool:
        drained = await source.drained()
        if drained and source is self._source:
            await self._rescan()
        return drained

    async def _process_and_release(self, claimed: Claimed, source: Source) -> None:
        held = (claimed.source_key, claimed.raw)
        self._held[held] += 1
        try:
            await self._process_until_done(claimed, source)
        finally:
            self._held[held] -= 1
            if self._held[held] <= 0:
                del self._held[held]
            self._slots.release()

    async def _process_until_done(self, claimed: Claimed, source: Source) -> None:
        backoff = Backoff()
        while True:
            try:
                await self.process(claimed, source)
                return
            except REDIS_ERRORS as exc:  # the entry stays claimed; the ledger stops re-sends
                self._redis_down(exc)
                await backoff.wait()
            except Exception as exc:
                log.exception("pipeline error on an entry of %s; recording it", names.display(claimed.source_key))
                await self.record_error(claimed.source_key, claimed.digest, exc)
                await self._until_done(claimed, lambda: source.finish(claimed))
                return

    async def record_error(self, source_key: str, digest: str, exc: Exception) -> None:
        """An entry that failed in the drain: kept in the undeliverable store (then archived)."""
        record = {
            "sink": "pipeline",
            "error": f"pipeline error: {type(exc).__name__}",
            "source_key": redact_key_name(source_key),
            "raw_digest": digest,
            "at": time.time(),
        }
        await self._undeliverable.push(record)
        self._metrics.entries.labels("error").inc()

    async def process(self, claimed: Claimed, source: Source) -> None:
        """One entry end to end: hand-off, then acknowledgement; Redis outages are waited out, the entry kept."""
        limit = self._settings.quarantine_after
        if claimed.claims >= limit:  # its consumer died or stalled holding it `limit` times
            await self._quarantine(claimed, source, quarantine_title(claimed.claims, None))
            return
        try:
            dead_letter = await self._intake(claimed)
        except DeadlineExceeded:
            await self._quarantine(claimed, source, quarantine_title(claimed.claims, self._settings.entry_deadline_s))
            return
        alert = await self._alert_for(dead_letter)
        routes = self._dispatcher.routed(alert)
        if await self._hand_off(claimed, alert, [route.sink.name for route in routes]) and claimed.receipt:
            await source.acknowledge(claimed, leave_note(alert, routes) if source.leave_check_s is not None else None)
        outcome = "poison" if dead_letter.parse_error else "alerted"
        self._metrics.child(self._metrics.entries, outcome).inc()
        self._metrics.entry_seconds.observe(time.monotonic() - claimed.claimed_at)
        self.processed += 1

    async def _intake(self, claimed: Claimed) -> DeadLetter:
        """`intake_of` on a thread under `entry_deadline_s` (DeadlineExceeded), through the solo lane."""
        offloop = self._offloop or OffLoop(1)
        self._offloop = offloop
        settings = self._settings

        def on_a_thread() -> DeadLetter:
            return intake_of(claimed, settings)

        try:
            return await self._lane.intake(claimed, lambda: offloop.run(on_a_thread, settings.entry_deadline_s))
        finally:
            self._show_runaways(offloop.runaways)

    def _show_runaways(self, runaways: int) -> None:
        if runaways:
            self._health.set("intake", Status.DEGRADED, f"{runaways} entries still running past the deadline")
        else:
            self._health.set("intake", Status.OK)

    async def _quarantine(self, claimed: Claimed, source: Source, title: str) -> None:
        """A static alert, handed off like any other, with a copy of the entry moved to the quarantine
        list in the same atomic step; then the entry is acknowledged at its source (for a watched
        store: the cursor moves on, the job system's store is never changed)."""
        queue = claimed.queue or names.queue_of(names.display(claimed.source_key))
        alert = quarantine_alert(claimed.origin or claimed.source_key, claimed.digest,
                                 self._severity.for_queue(queue), title, claimed.raw, queue=claimed.queue)
        log.error("quarantining an entry of %s (%s)", redact_key_name(claimed.source_key), title)
        routed = [route.sink.name for route in self._dispatcher.routed(alert)]
        if await self._hand_off(claimed, alert, routed, quarantine=True) and claimed.receipt:
            await source.acknowledge(claimed)
        self._metrics.entries.labels("quarantined").inc()
        self.processed += 1

    async def _alert_for(self, dead_letter: DeadLetter) -> Alert:
        """The cause's history, the summary, and the alert they make: routed severity and runbook link."""
        history = await record_seen(self._seen_before, dead_letter)
        summary = await self._summarizer.summarize(dead_letter, history)
        self._metrics.child(self._metrics.summaries, summary.source.value, summary.fallback_reason or "").inc()
        url = self._runbook_url(summary.runbook_hint) if summary.runbook_hint else None
        severity = self._severity.route(dead_letter.queue, summary.severity)
        trace_url = self._trace_link(dead_letter.trace.trace_id) if dead_letter.trace is not None else None
        return Alert(dead_letter=dead_letter, summary=summary, severity=severity, runbook_url=url, trace_url=trace_url,
                     seen_before=history)

    async def _hand_off(self, claimed: Claimed, alert: Alert, routed: list[str], *, quarantine: bool = False) -> bool:
        """Archive (or quarantine) the entry and queue its alert for every routed sink, in one step."""
        finish = self._handoff.finish
        done = await self._until_done(claimed, lambda: finish(claimed, alert, routed, quarantine=quarantine))
        if done and self._trends is not None:
            self._trends.count(alert.dead_letter.queue, alert.dead_letter.fingerprint)
        return done

    async def _until_done(self, claimed: Claimed, step: Callable[[], Awaitable[bool]]) -> bool:
        """`step` (a finish of `claimed`), Redis outages waited out; False: it was reaped meanwhile."""
        backoff = Backoff()
        while True:
            try:
                if not await step():
                    log.info("an entry of %s was reaped while in flight; it will be re-processed",
                             names.display(claimed.source_key))
                    return False
                return True
            except REDIS_ERRORS as exc:
                self._redis_down(exc)
                await backoff.wait()

    async def _rescan(self) -> None:
        await self._upkeep.show_depths()
        if self._offloop is not None:
            self._show_runaways(self._offloop.runaways)  # a runaway may end while the DLQs are idle
        self._metrics.processing_depth.set(len(self._in_flight))
        # Read from Redis (it sets the gauge): other processes add and retry records too.
        await self._undeliverable.depth()

    def _tick(self, source: Source) -> None:
        self.last_tick = time.monotonic()
        if source.health_check is not None:  # a kind answered; the bridge's Redis says nothing here
            self._show_source(source, True, "readable")
            return
        self._metrics.loop_tick.set_to_current_time()
        self._health.set("redis", Status.OK)
        self._health.set("loop", Status.OK)

    def _redis_down(self, exc: BaseException) -> None:
        if self._memory is not None and is_full_error(exc):  # up, but full: said once every 10 s
            self._health.set("redis", Status.FAILING, self._memory.refused(self._redis_target))
            return
        self._health.set("redis", Status.FAILING, type(exc).__name__)
        log.warning("Redis unavailable at %s (%s); retrying", self._redis_target, type(exc).__name__)
