"""OpenClawSummarizer: coalesce → cache → slot → breaker → budget → gateway → validate.

`summarize` never raises. Every path that does not end in a validated reply
ends in the static fallback with a reason (`timeout`, `http_<code>`, `error`,
`invalid_json`, `schema`, `circuit_open`, `budget`). Only validated OpenClaw
answers are cached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass

from bridge.errors import SummaryError
from bridge.health import Health, Status
from bridge.metrics import Metrics
from bridge.models import DeadLetter, Summary, SummaryDraft, SummarySource
from bridge.settings import OpenClawSettings
from bridge.summarize.breaker import BreakerState, CircuitBreaker
from bridge.summarize.budget import CallBudget
from bridge.summarize.cache import Coalescer, SummaryCache
from bridge.summarize.fallback import FallbackSummarizer
from bridge.summarize.openclaw import GatewayBusy, GatewayClient
from bridge.summarize.prompt import build_messages
from bridge.summarize.reply import content_of, parse_reply

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What one resolution produced: a draft (live or cached) or a fallback reason."""

    draft: SummaryDraft | None = None
    reason: str = ""
    cached: bool = False


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
        breaker: CircuitBreaker | None = None,
        budget: CallBudget | None = None,
    ) -> None:
        self._settings = settings
        self._gateway = gateway
        self._cache = cache
        self._fallback = fallback
        self._runbook_ids = frozenset(runbook_ids)
        self._system_prompt = system_prompt
        self._metrics = metrics
        self._health = health
        self.breaker = breaker or CircuitBreaker(
            settings.breaker_failures, settings.breaker_cooldown_s
        )
        self.budget = budget or CallBudget(settings.calls_per_minute)
        self._coalescer: Coalescer[Outcome] = Coalescer()
        self._slots = asyncio.Semaphore(settings.max_concurrency)
        self.calls = 0
        health.set("gateway", Status.OK, "closed")

    async def summarize(self, dead_letter: DeadLetter) -> Summary:
        try:
            return await self._summarize(dead_letter)
        except Exception:  # the last line of defence: a summary is always produced
            log.exception("summarizer error on %s; using the fallback", dead_letter.idempotency_key)
            return self._fallback.build(dead_letter, "error")

    async def _summarize(self, dl: DeadLetter) -> Summary:
        if not dl.fingerprint:
            return self._to_summary(dl, await self._resolve(dl), led=True)
        outcome, led = await self._coalescer.run(dl.fingerprint, lambda: self._resolve(dl))
        return self._to_summary(dl, outcome, led)

    def _to_summary(self, dl: DeadLetter, outcome: Outcome, led: bool) -> Summary:
        if outcome.draft is None:
            return self._fallback.build(dl, outcome.reason)
        source = SummarySource.OPENCLAW if led and not outcome.cached else SummarySource.CACHE
        return Summary(**outcome.draft.model_dump(), source=source)

    async def _resolve(self, dl: DeadLetter) -> Outcome:
        cached = await self._cache.get(dl.fingerprint)
        if cached is not None:
            return Outcome(draft=cached, cached=True)
        async with self._slots:  # breaker and budget are asked once a slot is free
            refusal = self._refusal()
            if refusal:
                return Outcome(reason=refusal)
            try:
                draft = await self._ask(dl)
            except SummaryError as exc:
                self._failed(exc)
                return Outcome(reason=exc.reason)
            self._succeeded()
        await self._cache.put(dl.fingerprint, draft)
        return Outcome(draft=draft)

    def _refusal(self) -> str:
        """Why no call may go now ("" when one may): circuit, a 429 pause, or the budget."""
        if not self.breaker.allow():
            self._show_breaker()
            return "http_429" if self.breaker.paused else "circuit_open"
        if not self.budget.try_acquire():
            self.breaker.abandon()
            return "budget"
        return ""

    async def _ask(self, dl: DeadLetter) -> SummaryDraft:
        messages = build_messages(self._system_prompt, dl)
        self.calls += 1
        try:
            response = await self._gateway.complete(messages)
        except SummaryError:
            raise
        except Exception as exc:  # a transport may raise its own errors
            raise SummaryError("error", f"gateway call failed ({type(exc).__name__})") from None
        return parse_reply(content_of(response), self._runbook_ids)

    def _failed(self, exc: SummaryError) -> None:
        self.breaker.record_failure()
        if isinstance(exc, GatewayBusy):
            self.breaker.pause(exc.retry_after_s or self._settings.breaker_cooldown_s)
        log.warning("OpenClaw summary failed (%s); using the fallback", exc.reason)
        self._show_breaker(last_failure=exc.reason)

    def _succeeded(self) -> None:
        self.breaker.record_success()
        self._show_breaker()

    def _show_breaker(self, last_failure: str = "") -> None:
        state = self.breaker.state
        is_open = state is BreakerState.OPEN or self.breaker.paused
        self._metrics.gateway_circuit_open.set(1 if is_open else 0)
        if is_open:
            detail = "paused by 429 Retry-After" if self.breaker.paused else "circuit open"
            self._health.set("gateway", Status.DEGRADED, detail)
        elif last_failure or self.breaker.consecutive_failures:
            detail = f"recent failures ({last_failure or 'probe'})"
            self._health.set("gateway", Status.DEGRADED, detail)
        else:
            self._health.set("gateway", Status.OK, state.value)

    async def aclose(self) -> None:
        return None
