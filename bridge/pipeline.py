"""The pipeline loop: claim → normalize → summarize → hand-off (finish).

The hand-off archives the entry and queues its alert for every routed sink in one step; the sink
workers (`bridge.delivery.worker`) deliver at their own pace, so the drain never waits on a sink.
Claims take a worker slot (`bridge.slots`), so in-flight work is bounded by `sources.concurrency`.
Intake runs on daemon threads under `sources.entry_deadline_s`, through the solo lane
(`bridge.solo`: a suspect's intake runs alone). An entry whose solo deaths reached
`sources.quarantine_after`, or whose intake ran past the deadline, is quarantined: a static alert
is handed off as the entry moves, unparsed, to `dlq_bridge:quarantine:<ref>` (docs/design.md, 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from bridge import keys
from bridge.backoff import Backoff
from bridge.delivery.dispatcher import Dispatcher
from bridge.delivery.undeliverable import UndeliverableStore
from bridge.delivery.workers import Delivery
from bridge.depths import DepthView
from bridge.errors import REDIS_ERRORS
from bridge.handoff import HandOff
from bridge.health import Health, Status
from bridge.intake import prepare
from bridge.kind_pipeline import KindDrain
from bridge.metrics import Metrics
from bridge.models import Alert, DeadLetter
from bridge.offloop import DeadlineExceeded, OffLoop
from bridge.periodic import every
from bridge.quarantine import quarantine_alert, quarantine_title
from bridge.redact import redact_key_name
from bridge.redis_memory import RedisMemory, is_full_error
from bridge.settings import SeveritySettings, SourcesSettings
from bridge.slots import Slots
from bridge.solo import SoloLane
from bridge.sources.base import Claimed, Source
from bridge.sources.kinds import KindSource
from bridge.summarize.base import Summarizer

log = logging.getLogger(__name__)

INTAKE_THREADS = 4
CLAIM_BATCH = 16  # entries claimed per script call at most (free worker slots permitting)


def intake(raw: bytes, source_key: str, settings: SourcesSettings) -> DeadLetter:
    """Normalize, redact and fingerprint one entry (runs on an intake thread).

    `source_key` is byte-exact; the envelope gets its display form.
    """
    return prepare(raw, keys.display(source_key), settings)
DROP_HEARTBEAT_S = 0.5


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
        delivery: Delivery | None = None,
        kinds: Sequence[KindSource] = (),
        memory: RedisMemory | None = None,
    ) -> None:
        self._kinds = list(kinds)
        self._memory = memory
        self._redis_target = redis_target  # masked, for the logs
        self._source = source
        self._handoff = handoff
        self._delivery = delivery
        self._undeliverable = undeliverable
        self._summarizer = summarizer
        self._dispatcher = dispatcher
        self._settings = settings
        self._metrics = metrics
        self._health = health
        self._runbook_url = runbook_url
        self._severity = severity or SeveritySettings()
        self._offloop: OffLoop | None = None
        self._depths = DepthView(metrics, health)
        self._slots = Slots(settings.concurrency, self._busy_tick)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._held: Counter[tuple[str, bytes]] = Counter()
        self._unheld: set[tuple[str, bytes]] = set()
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
        upkeep = [
            asyncio.create_task(self._every(self._settings.heartbeat_interval_s, self._source.heartbeat, stop)),
            asyncio.create_task(self._every(self._settings.rescan_interval_s, self._rescan, stop)),
            asyncio.create_task(self._every(self._settings.reap_interval_s, self._reap, stop)),
            asyncio.create_task(self._every(self._settings.reap_interval_s, self._sweep_own, stop)),
        ]
        try:
            await self._claim_all(stop, burst)
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
                await self._source.heartbeat()
                recovered = await self._source.recover_own()
                await self._rescan()
                break
            except REDIS_ERRORS as exc:
                self._redis_down(exc)
                await backoff.wait()
        if recovered:
            self._metrics.reaped.inc(recovered)
            log.info("returned %d entries from a previous run to their DLQs", recovered)

    async def _claim_all(self, stop: asyncio.Event, burst: bool) -> None:
        """The list claimer and one `KindDrain` per configured kind, sharing the worker slots."""
        drains = [KindDrain(source, self).run(stop, burst) for source in self._kinds]
        await asyncio.gather(self._claim_loop(stop, burst), *drains)

    # --- what a KindDrain uses (bridge/kind_pipeline.py) -----------------------------------
    @property
    def health(self) -> Health:
        return self._health

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    @property
    def settings(self) -> SourcesSettings:
        return self._settings

    @property
    def severity(self) -> SeveritySettings:
        return self._severity

    @property
    def dispatcher(self) -> Dispatcher:
        return self._dispatcher

    @property
    def handoff(self) -> HandOff:
        return self._handoff

    async def acquire_slot(self, stop: asyncio.Event) -> bool:
        return await self._slots.acquire(stop)

    def release_slot(self) -> None:
        self._slots.release()

    def track(self, task: asyncio.Task[None]) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def run_intake(self, job: Callable[[], DeadLetter], claimed: Claimed | None = None) -> DeadLetter:
        """Intake on a thread under `entry_deadline_s` (DeadlineExceeded), through the solo lane."""
        offloop = self._offloop or OffLoop(1)
        self._offloop = offloop
        try:
            return await self._lane.intake(claimed, lambda: offloop.run(job, self._settings.entry_deadline_s))
        finally:
            self._show_runaways(offloop.runaways)

    async def alert_for(self, dead_letter: DeadLetter) -> Alert:
        return await self._alert_for(dead_letter)

    async def record_error(self, source_key: str, digest: str, exc: Exception) -> None:
        """An entry or record that failed in the pipeline: kept in the undeliverable store."""
        record = {
            "sink": "pipeline",
            "error": f"pipeline error: {type(exc).__name__}",
            "source_key": redact_key_name(source_key),
            "raw_digest": digest,
            "at": time.time(),
        }
        await self._undeliverable.push(record)
        self._metrics.entries.labels("error").inc()

    def count(self, outcome: str, started: float) -> None:
        self._metrics.child(self._metrics.entries, outcome).inc()
        self._metrics.entry_seconds.observe(time.monotonic() - started)
        self.processed += 1

    async def _claim_loop(self, stop: asyncio.Event, burst: bool) -> None:
        backoff = Backoff()
        while await self._slots.acquire(stop):
            slots = 1 + await self._slots.take_free(CLAIM_BATCH - 1)
            try:
                batch = await self._source.claim_batch(slots)
            except REDIS_ERRORS as exc:
                self._slots.release(slots)
                self._redis_down(exc)
                await backoff.wait()
                continue
            self._tick()
            backoff.reset()
            self._slots.release(slots - len(batch))
            if not batch:
                if burst and not self._in_flight and await self._all_empty():
                    return
                continue
            for claimed in sorted(batch, key=lambda c: c.claims):  # suspects: fewest solo deaths first
                self.track(asyncio.create_task(self._process_and_release(claimed)))

    def _busy_tick(self) -> None:  # no free slot for a second: the loop still lives
        self.last_tick = time.monotonic()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def _reap(self) -> None:
        self._metrics.reaped.inc(await self._source.reap())

    async def drain_in_flight(self) -> None:
        if self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def _all_empty(self) -> bool:
        await self._rescan()
        return sum((await self._source.depths()).values()) == 0 and not self._source.waiting()

    async def _process_and_release(self, claimed: Claimed) -> None:
        held = (claimed.source_key, claimed.raw)
        self._held[held] += 1
        try:
            await self._process_until_done(claimed)
        finally:
            self._held[held] -= 1
            if self._held[held] <= 0:
                del self._held[held]
            self._slots.release()

    async def _sweep_own(self) -> None:
        """Return entries stuck in our processing list that no worker holds.

        A claim whose reply was lost (Redis restarted, a timeout) leaves an entry
        in our list that nobody processes. Only entries seen unheld in two sweeps
        in a row are returned, so a claim on its way to a worker is never touched.
        """
        unheld = set((await self._source.own_entries()) - self._held)
        for source_key, raw in unheld & self._unheld:
            if await self._source.release(source_key, raw):
                self._metrics.reaped.inc()
                log.warning("returned an orphaned claim to %s", source_key)
        self._unheld = unheld

    async def _process_until_done(self, claimed: Claimed) -> None:
        backoff = Backoff()
        while True:
            try:
                await self.process(claimed)
                return
            except REDIS_ERRORS as exc:  # the entry stays claimed; the ledger stops re-sends
                self._redis_down(exc)
                await backoff.wait()
            except Exception as exc:
                log.exception("pipeline error on an entry of %s; recording it", claimed.source_key)
                await self._record_pipeline_error(claimed, exc)
                return

    async def _record_pipeline_error(self, claimed: Claimed, exc: Exception) -> None:
        await self.record_error(claimed.source_key, claimed.digest, exc)
        await self._finish(claimed)

    async def process(self, claimed: Claimed) -> None:
        """One entry end to end; Redis outages are waited out, the entry is kept."""
        limit = self._settings.quarantine_after
        if claimed.claims >= limit:  # its consumer died or stalled holding it `limit` times
            await self._quarantine(claimed, quarantine_title(claimed.claims, None))
            return
        try:
            dead_letter = await self._normalize(claimed)
        except DeadlineExceeded:
            await self._quarantine(claimed, quarantine_title(claimed.claims, self._settings.entry_deadline_s))
            return
        alert = await self._alert_for(dead_letter)
        routed = [route.sink.name for route in self._dispatcher.routed(alert)]
        await self._hand_off(claimed, alert, routed)
        outcome = "poison" if dead_letter.parse_error else "alerted"
        self._metrics.child(self._metrics.entries, outcome).inc()
        self._metrics.entry_seconds.observe(time.monotonic() - claimed.claimed_at)
        self.processed += 1

    async def _normalize(self, claimed: Claimed) -> DeadLetter:
        return await self.run_intake(functools.partial(intake, claimed.raw, claimed.source_key, self._settings),
                                     claimed)

    def _show_runaways(self, runaways: int) -> None:
        if runaways:
            self._health.set("intake", Status.DEGRADED, f"{runaways} entries still running past the deadline")
        else:
            self._health.set("intake", Status.OK)

    async def _quarantine(self, claimed: Claimed, title: str) -> None:
        """A static alert, handed off like any other, with the entry moved to the quarantine list.

        One atomic step, so the drain never waits on a sink for it either.
        """
        severity = self._severity.for_queue(keys.queue_of(keys.display(claimed.source_key)))
        alert = quarantine_alert(claimed.source_key, claimed.digest, severity, title, claimed.raw)
        log.error("quarantining an entry of %s (%s)", redact_key_name(claimed.source_key), title)
        routed = [route.sink.name for route in self._dispatcher.routed(alert)]
        await self._hand_off(claimed, alert, routed, quarantine=True)
        self._metrics.entries.labels("quarantined").inc()
        self.processed += 1

    async def _alert_for(self, dead_letter: DeadLetter) -> Alert:
        summary = await self._summarizer.summarize(dead_letter)
        self._metrics.child(self._metrics.summaries, summary.source.value, summary.fallback_reason or "").inc()
        url = self._runbook_url(summary.runbook_hint) if summary.runbook_hint else None
        severity = self._severity.route(dead_letter.queue, summary.severity)
        return Alert(dead_letter=dead_letter, summary=summary, severity=severity, runbook_url=url)

    async def _hand_off(self, claimed: Claimed, alert: Alert, routed: list[str], *, quarantine: bool = False) -> None:
        """Archive (or quarantine) the entry and queue its alert for every routed sink, in one step."""
        await self._until_done(claimed, lambda: self._handoff.finish(claimed, alert, routed, quarantine=quarantine))

    async def _finish(self, claimed: Claimed) -> None:
        await self._until_done(claimed, lambda: self._source.finish(claimed))

    async def _until_done(self, claimed: Claimed, step: Callable[[], Awaitable[bool]]) -> None:
        """`step` (a finish of `claimed`), Redis outages waited out; False: it was reaped meanwhile."""
        backoff = Backoff()
        while True:
            try:
                if not await step():
                    log.info("entry %s was reaped while in flight; it will be re-processed", claimed.source_key)
                return
            except REDIS_ERRORS as exc:
                self._redis_down(exc)
                await backoff.wait()

    async def _rescan(self) -> None:
        await self._source.rescan()
        self._depths.show({**await self._source.depths(), **await self._depths.kind_depths(self._kinds)})
        self._depths.show_waiting(self._source.waiting())
        if self._offloop is not None:
            self._show_runaways(self._offloop.runaways)  # a runaway may end while the DLQs are idle
        self._metrics.processing_depth.set(len(self._in_flight))
        # Read from Redis (it sets the gauge): other processes add and retry records too.
        await self._undeliverable.depth()

    async def _every(self, interval: float, job: Callable[[], Awaitable[object]], stop: asyncio.Event) -> None:
        await every(interval, job, stop, what=f"upkeep task {getattr(job, '__name__', job)}",
                    on_success=lambda: self._health.set("redis", Status.OK), on_redis_error=self._redis_down)

    def _tick(self) -> None:
        self.last_tick = time.monotonic()
        self._metrics.loop_tick.set_to_current_time()
        self._health.set("redis", Status.OK)
        self._health.set("loop", Status.OK)

    def _redis_down(self, exc: BaseException) -> None:
        if self._memory is not None and is_full_error(exc):  # up, but full: said once every 10 s
            self._health.set("redis", Status.FAILING, self._memory.refused(self._redis_target))
            return
        self._health.set("redis", Status.FAILING, type(exc).__name__)
        log.warning("Redis unavailable at %s (%s); retrying", self._redis_target, type(exc).__name__)
