"""OpenClawSummarizer: coalesce → cache → slot → gate → gateway → validate.

`summarize` never raises. Every path that does not end in a validated reply
ends in the static fallback with a reason (`timeout`, `http_<code>`, `error`,
`invalid_json`, `schema`, `circuit_open`, `budget`). A reply is salvaged field
by field (bridge.summarize.salvage): a bad runbook id, severity or step list is
repaired and the repair recorded on the summary and in
`dlq_bridge_summary_repairs_total{field}`. Only validated OpenClaw answers are
cached.

The gate (breaker, 429 pause, calls-per-minute budget) is fleet-wide in Redis
(bridge.stores.gateway_gate). A gateway 429 whose Retry-After pause is at most
`openclaw.max_wait_s` is waited out (outside the concurrency slots) and the
call made again; since that happens inside the coalesced resolution, a storm
of one cause still costs one call — across the fleet too: one replica leads
each fingerprint's call and the others read its cached answer
(bridge.stores.summary_cache). A failure whose dependency is down is keyed by its
cause instead, and the model is shown the cause alone
(bridge.summarize.subject): one call for an outage over any number of queues.
Longer pauses, or an open circuit, fall back (`http_429`, `circuit_open`). A reply that breaks the schema is a quality
problem, not an availability one: it never counts toward the breaker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from bridge.clients.net_errors import describe_transport_error
from bridge.core.errors import SummaryError
from bridge.core.health import Health, Status
from bridge.core.metrics import Metrics
from bridge.core.models import DeadLetter, Summary, SummaryDraft, SummarySource
from bridge.core.seen_before import SeenBefore
from bridge.intake.cause import cause_of
from bridge.settings import OpenClawSettings
from bridge.stores.gateway_gate import Admission, FleetGate, GateState, LocalGate
from bridge.stores.summary_cache import Coalescer, SummaryCache
from bridge.summarize.fallback import FallbackSummarizer
from bridge.summarize.openclaw import GatewayBusy, GatewayClient
from bridge.summarize.reply import content_of
from bridge.summarize.salvage import Salvaged, Shown, salvage_reply
from bridge.summarize.subject import Subject, subject_of
from bridge.summarize.tokens import Tokens, TokenSink, count_tokens, tokens_of
from bridge.telemetry.attributes import model_reply
from bridge.telemetry.port import NO_TELEMETRY, Telemetry

log = logging.getLogger(__name__)

QUALITY_REASONS = frozenset({"schema"})  # the gateway answered: not an availability failure
LEAD_MARGIN_S = 5.0  # a follower waits at most the leader's longest call and this much


@dataclass(frozen=True)
class Outcome:
    """What one resolution produced: a draft (live or cached) or a fallback reason."""

    draft: SummaryDraft | None = None
    reason: str = ""
    cached: bool = False
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pause:
    """The gateway asked for a pause of `seconds` (a 429): wait it out, or fall back."""

    seconds: float


class OpenClawSummarizer:
    """Summaries from the OpenClaw gateway, protected and always answered."""

    def __init__(
        self,
        settings: OpenClawSettings,
        gateway: GatewayClient,
        cache: SummaryCache,
        fallback: FallbackSummarizer,
        runbook_ids: Collection[str],
        system_prompt: str,
        metrics: Metrics,
        health: Health,
        *,
        gate: FleetGate | LocalGate | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        runbook_base: str | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        on_tokens: TokenSink | None = None,
    ) -> None:
        self._telemetry = telemetry
        self._on_tokens = on_tokens  # the day's tokens for the console (bridge.stores.trends)
        self._settings = settings
        self._runbook_base = runbook_base  # the one place links in model text may point to
        self._gateway = gateway
        self._cache = cache
        self._fallback = fallback
        self._runbook_ids = frozenset(runbook_ids)
        self._system_prompt = system_prompt
        self._metrics = metrics
        self._health = health
        self.gate = gate or LocalGate(settings)
        self._sleep = sleep
        self._coalescer: Coalescer[Outcome] = Coalescer()
        self._slots = asyncio.Semaphore(settings.max_concurrency)
        self.calls = 0
        health.set("gateway", Status.OK, "closed")

    async def summarize(self, dead_letter: DeadLetter, history: SeenBefore | None = None) -> Summary:
        try:
            return await self._summarize(dead_letter, history)
        except Exception:  # the last line of defence: a summary is always produced
            log.exception("summarizer error on %s; using the fallback", dead_letter.idempotency_key)
            return self._fallback.build(dead_letter, "error")

    async def _summarize(self, dl: DeadLetter, history: SeenBefore | None) -> Summary:
        subject = subject_of(dl, self._settings.summary_per_cause)
        if not subject.key:
            return self._to_summary(dl, await self._resolve(subject, history), led=True)
        joined = self._telemetry.joining(subject.key)  # a call for this subject is running here
        outcome, led = await self._coalescer.run(subject.key, lambda: self._resolve(subject, history))
        if not joined and (outcome.cached or not led):
            self._telemetry.served(subject.key)
        return self._to_summary(dl, outcome, led)

    def _to_summary(self, dl: DeadLetter, outcome: Outcome, led: bool) -> Summary:
        if outcome.draft is None:
            return self._fallback.build(dl, outcome.reason)
        source = SummarySource.OPENCLAW if led and not outcome.cached else SummarySource.CACHE
        return Summary(**outcome.draft.model_dump(), source=source, repairs=outcome.repairs)

    async def _resolve(self, subject: Subject, history: SeenBefore | None = None) -> Outcome:
        key = subject.key
        cached, token = await self._cache.begin(key)  # one round trip: cache, else the lead
        if cached is not None:
            return Outcome(draft=cached, cached=True)
        if token is None:  # another replica is asking the gateway about this cause
            patience = self._settings.timeout_s + self._settings.max_wait_s + LEAD_MARGIN_S
            cached = await self._cache.follow(key, patience)
            if cached is not None:
                return Outcome(draft=cached, cached=True)
            token = await self._cache.lead(key) or ""
        keeper = self._cache.keep(key, token) if token else None
        outcome: Outcome | None = None
        try:
            outcome = await self._call(subject, history)
            return outcome
        finally:
            if keeper is not None:
                keeper.stop()
            draft = outcome.draft if outcome is not None else None
            if token:
                await self._cache.end(key, token, draft)  # the answer cached, the lead dropped
            elif draft is not None:
                await self._cache.put(key, draft)

    async def _call(self, subject: Subject, history: SeenBefore | None) -> Outcome:
        """The gateway call (waiting out brief 429 pauses); the caller caches a draft."""
        patience = self._settings.max_wait_s
        while True:
            async with self._slots:  # the gate is asked once a slot is free
                result = await self._try_once(subject, history)
            if isinstance(result, Outcome):
                return result
            if result.seconds > patience:
                self._show(GateState(open=False, paused_s=result.seconds))
                return Outcome(reason="http_429")
            await self._wait_out(result.seconds)
            patience -= result.seconds

    async def _try_once(self, subject: Subject, history: SeenBefore | None) -> Outcome | Pause:
        admission = await self.gate.admit()
        if admission.verdict == "paused":
            return Pause(admission.wait_s)
        if admission.verdict != "ok":
            if admission.verdict == "open":
                self._show(GateState(open=True, paused_s=0.0))
            return Outcome(reason="circuit_open" if admission.verdict == "open" else "budget")
        try:
            salvaged = await self._ask(subject, history)
        except GatewayBusy as exc:  # a pause for the whole fleet, not a failure
            seconds = exc.retry_after_s
            pause = Pause(self._settings.breaker_cooldown_s if seconds is None else seconds)
            await self.gate.pause(pause.seconds)
            return pause
        except SummaryError as exc:
            await self._failed(exc, admission)
            return Outcome(reason=exc.reason)
        self._show(await self.gate.success(admission))
        for field in salvaged.repairs:
            self._metrics.child(self._metrics.summary_repairs, field).inc()
        return Outcome(draft=salvaged.draft, repairs=salvaged.repairs)

    async def _wait_out(self, seconds: float) -> None:
        """A brief 429 pause: wait (holding no slot) rather than degrade the summary."""
        self._metrics.gateway_waits.inc()
        log.info("gateway paused by 429 for %.2fs: waiting it out", seconds)
        await self._sleep(seconds)

    async def _ask(self, subject: Subject, history: SeenBefore | None) -> Salvaged:
        letter = subject.defaults_letter()
        cause = subject.cause or cause_of(letter.last_error, letter.parse_error)
        context = self._fallback.context(letter, cause.condition, history)
        messages = subject.messages(self._system_prompt, context)
        defaults = self._fallback.defaults(letter)
        shown = Shown(tuple(rb.get("use_when", "") for rb in context.runbooks), letter.last_error or "",
                      subject.facts(history))
        self.calls += 1
        model = self._settings.model or f"openclaw/{self._settings.agent}"
        with self._telemetry.model_call(model, subject.key) as call:
            try:
                response = await self._gateway.complete(messages)
                if self._telemetry.enabled:
                    for key, value in model_reply(response).items():
                        call.set(key, value)
            except SummaryError as exc:
                call.fail(exc.reason)
                raise
            except Exception as exc:  # a transport may raise its own errors
                call.fail("error")
                raise SummaryError("error", f"gateway call failed: {describe_transport_error(exc)}") from None
            tokens = tokens_of(messages, response)
            try:
                salvaged = salvage_reply(
                    content_of(response), self._runbook_ids, defaults, runbook_base=self._runbook_base, shown=shown
                )
            except SummaryError as exc:
                call.fail(exc.reason)
                self._count(tokens, "fallback")
                raise
        self._count(tokens, "openclaw")
        return salvaged

    def _count(self, tokens: Tokens, source: str) -> None:
        count_tokens(self._metrics, self._settings.model or "default", source, tokens)
        if self._on_tokens is not None:
            self._on_tokens(tokens.prompt, tokens.completion, tokens.estimated)

    async def _failed(self, exc: SummaryError, admission: Admission) -> None:
        if exc.reason in QUALITY_REASONS:  # the gateway is up; only the reply was bad
            log.warning("OpenClaw reply rejected (%s); using the fallback", exc.reason)
            self._show(await self.gate.success(admission))
            return
        log.warning("OpenClaw summary failed (%s: %s); using the fallback", exc.reason, exc)
        self._show(await self.gate.failure(), last_failure=exc.reason)

    def _show(self, state: GateState, last_failure: str = "") -> None:
        is_open = state.open or state.paused_s > 0
        self._metrics.gateway_circuit_open.set(1 if is_open else 0)
        if is_open:
            detail = "paused by 429 Retry-After" if state.paused_s > 0 else "circuit open"
            self._health.set("gateway", Status.DEGRADED, detail)
        elif last_failure:
            self._health.set("gateway", Status.DEGRADED, f"recent failures ({last_failure})")
        else:
            self._health.set("gateway", Status.OK, "closed")

    async def aclose(self) -> None:
        await self._cache.aclose()
