"""The static summary: built from the error and the runbooks; it cannot fail."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from functools import cached_property

from bridge.core.models import DeadLetter, Severity, Summary, SummarySource
from bridge.core.seen_before import SeenBefore
from bridge.summarize.prompt import Context
from bridge.summarize.runbooks import RunbookCatalog
from bridge.summarize.salvage import Defaults

# Runbooks that only fit when the dead letter shows it: a hint the entry contradicts is repaired.
CONTRADICTED: dict[str, Callable[[DeadLetter], bool]] = {
    "unparseable-payload": lambda dl: dl.parse_error is not None,
    "no-error-recorded": lambda dl: dl.last_error is None and dl.parse_error is None,
}

# What a cause's condition (bridge.intake.cause) suggests, besides the runbooks whose patterns match.
CAUSE_RUNBOOKS: dict[str, tuple[str, ...]] = {
    "unreachable": ("connection-refused", "dns-failure", "timeout"),
    "unavailable": ("connection-refused",),
    "rate-limited": ("rate-limited", "throttled-by-cloud-api"),
}

_GENERIC_STEPS = (
    "Inspect the entry with `dlq-bridge peek`",
    "Fix the cause, then `dlq-bridge redrive`",
)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fallback_title(dl: DeadLetter) -> str:
    if dl.parse_error:
        return _cut(f"{dl.queue}: unparseable dead letter ({dl.parse_error})", 120)
    job = dl.job_name or "job"
    if dl.attempts is None:
        tries = "(attempts unknown)"
    else:
        tries = f"after {dl.attempts} attempt{'' if dl.attempts == 1 else 's'}"
    return _cut(f"{dl.queue}: {job} failed {tries}", 120)


def fallback_cause(dl: DeadLetter) -> str:
    """The likely cause without a model: the last error itself (docs/design.md, section 4).

    Cards show it once: when the cause is just the error, they drop the "likely cause" line
    and keep the full "last error" (`Alert.cause_repeats_error`).
    """
    if dl.parse_error:
        return _cut(
            f"The dead letter could not be read: {dl.parse_error}. "
            "The raw entry is kept in the archive for inspection.",
            500,
        )
    if dl.last_error is None:
        return "No error was recorded for this job: the producer stores none with its dead letters."
    return _cut(dl.last_error.strip(), 500)


class LazyDefaults:
    """`Defaults` of one dead letter, worked out when a repair first reads them: matching the runbook
    is about 90 regular-expression searches, and most replies need no repair (`ruled_out`, read for
    every runbook hint, is two checks)."""

    def __init__(self, dl: DeadLetter, runbooks: RunbookCatalog, severity_for: Callable[[str], Severity]) -> None:
        self._dl, self._runbooks, self._severity_for = dl, runbooks, severity_for
        self.ruled_out = frozenset(rid for rid, holds in CONTRADICTED.items() if not holds(dl))

    @cached_property
    def _made(self) -> Defaults:
        runbook = self._runbooks.match(self._dl)
        steps = tuple(runbook.next_steps) if runbook and runbook.next_steps else _GENERIC_STEPS
        return Defaults(runbook.id if runbook else "", self._severity_for(self._dl.queue), steps, self.ruled_out)

    @property
    def runbook_hint(self) -> str:
        return self._made.runbook_hint

    @property
    def title(self) -> str:
        """The fallback's title; a shared cause's stand-in (no queue) is titled by its error."""
        return fallback_title(self._dl) if self._dl.queue else _cut(self._dl.last_error or "A job failed", 120)

    @property
    def likely_cause(self) -> str:
        return fallback_cause(self._dl)

    @property
    def severity(self) -> Severity:
        return self._made.severity

    @property
    def next_steps(self) -> tuple[str, ...]:
        return self._made.next_steps


def with_names(step: str, dl: DeadLetter) -> str:
    """A runbook step with its `<queue>` and `<id>` filled in from this entry, so a command can be pasted
    (quoted for a shell; a placeholder whose value is unknown stays)."""
    if dl.queue:
        step = step.replace("<queue>", shlex.quote(dl.queue[:100]))
    if dl.job_id:
        step = step.replace("<id>", shlex.quote(dl.job_id[:100]))
    return step


class FallbackSummarizer:
    """Summaries without a model: title, cause, steps and hint from the runbooks."""

    def __init__(self, runbooks: RunbookCatalog, severity_for: Callable[[str], Severity]) -> None:
        self._runbooks = runbooks
        self._severity_for = severity_for

    def defaults(self, dl: DeadLetter) -> LazyDefaults:
        """What a repaired reply field becomes: this summary's runbook, steps and the routed severity."""
        return LazyDefaults(dl, self._runbooks, self._severity_for)

    def context(self, dl: DeadLetter, condition: str, history: SeenBefore | None = None) -> Context:
        """What the model is shown besides the dead letter: the runbooks that may fit (by the matcher and
        the cause's `condition`) with their "use when" lines, and the cause's history."""
        runbooks = self._runbooks.candidates(dl, CAUSE_RUNBOOKS.get(condition, ()))
        return Context(tuple(self._runbooks.catalogue(runbooks)), history)

    def build(self, dl: DeadLetter, reason: str) -> Summary:
        runbook = self._runbooks.match(dl)
        steps = [_cut(with_names(s, dl), 200) for s in runbook.next_steps] if runbook else list(_GENERIC_STEPS)
        return Summary(
            title=fallback_title(dl),
            severity=self._severity_for(dl.queue),
            likely_cause=fallback_cause(dl),
            next_steps=steps[:4],
            runbook_hint=runbook.id if runbook else "",
            source=SummarySource.FALLBACK,
            fallback_reason=reason,
        )

    async def summarize(self, dead_letter: DeadLetter, history: SeenBefore | None = None) -> Summary:
        return self.build(dead_letter, "disabled")

    async def aclose(self) -> None:
        return None
