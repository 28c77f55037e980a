"""Console sink: a readable incident card on stdout (the default sink)."""

from __future__ import annotations

import sys
from typing import Any, Literal, TextIO

from pydantic import Field

from bridge.core.models import Alert, Notification
from bridge.sinks import digest
from bridge.sinks.sink_plugin import SinkContext, SinkPlugin
from bridge.sinks.sink_settings import SinkSettingsBase

_COLORS = {"critical": "\033[1;31m", "error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}
_RESET = "\033[0m"
TEXT_CHARS = 300  # of the last error and the payload excerpt, each on one line


def render_card(alert: Alert, *, color: bool = False) -> str:
    """The card as text: title, severity, queue, job, attempts, cause, steps, the entry's own
    text (last error, payload excerpt), runbook."""
    dl, summary = alert.dead_letter, alert.summary
    severity = alert.severity.value.upper()
    if color:
        severity = f"{_COLORS[alert.severity.value]}{severity}{_RESET}"
    if summary.severity is not alert.severity:
        severity += f"  (assessed {summary.severity.value})"
    source = summary.source.value
    if summary.fallback_reason:
        source += f" ({summary.fallback_text})"
    lines = [
        f"┌─ dlq-bridge alert{' [TEST]' if alert.is_test else ''} " + "─" * 40,
        f"│ {summary.title}",
        f"│ severity   {severity}",
        f"│ queue      {dl.queue}",
        f"│ job        {dl.job_name or '?'}  id={dl.job_id}",
        f"│ attempts   {dl.attempts if dl.attempts is not None else '?'}",
    ]
    if dl.correlation_id:
        lines.append(f"│ correlation {dl.correlation_id}")
    if not alert.cause_repeats_error:
        lines.append(f"│ cause      {summary.likely_cause}")
    lines.extend(f"│ step {i}     {step}" for i, step in enumerate(summary.next_steps, 1))
    lines.extend(_entry_lines(alert))
    runbook = alert.runbook_url or summary.runbook_hint or "-"
    lines.append(f"│ runbook    {runbook}")
    lines.append(f"│ summary    {source}")
    lines.append("└" + "─" * 58)
    return "\n".join(lines)


def _entry_lines(alert: Alert) -> list[str]:
    """What the entry itself says, as Slack and webhooks show it: last error and payload excerpt.

    (Why an entry is unreadable is in its title and cause already.)
    """
    dl = alert.dead_letter
    shown = [("error", dl.last_error), ("payload", dl.payload_excerpt)]
    return [f"│ {label:<10} {_one_line(text, TEXT_CHARS)}" for label, text in shown if text]


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
SAMPLES = 10


def render_group_card(n: Notification, *, color: bool = False) -> str:
    """A group's card as text; a group of one is exactly the job's own card."""
    if n.is_single:
        return render_card(n.first, color=color)
    first, summary = n.first, n.first.summary
    severity = n.severity.value.upper()
    if color:
        severity = f"{_COLORS[n.severity.value]}{severity}{_RESET}"
    lines = [
        f"┌─ dlq-bridge {digest.title(n).lower()}{' [TEST]' if first.is_test else ''} " + "─" * 34,
        f"│ {digest.headline(n)}",
        f"│ {digest.change_line(n)}",
        f"│ severity   {severity}",
        f"│ jobs       {n.count:,}" + (f" ({n.new_count:,} new)" if n.sequence > 1 else ""),
        *(f"│ {label.lower():<10} {value}" for label, value in digest.facts(n)),
        *(f"│ queue      {line}" for line in digest.queue_spans(n) if n.by_cause),
        f"│ first seen {digest.when(n.first_seen)}",
        f"│ last seen  {digest.when(n.last_seen)}",
        f"│ cause      {summary.likely_cause}",
    ]
    lines.extend(f"│ step {i}     {step}" for i, step in enumerate(summary.next_steps, 1))
    lines.extend(f"│ sample     {j.queue}/{j.job_id}" for j in n.jobs[:SAMPLES])
    lines.append(f"│ runbook    {first.runbook_url or summary.runbook_hint or '-'}")
    lines.append("└" + "─" * 58)
    return "\n".join(lines)


class ConsoleSink:
    """Prints one card per alert; never fails."""

    def __init__(self, name: str = "console", stream: TextIO | None = None, color: bool | None = None) -> None:
        self.name = name
        self._stream = stream
        self._color = color

    def render(self, alert: Alert) -> dict[str, Any]:
        return {"card": render_card(alert)}

    async def send(self, alert: Alert) -> None:
        stream = self._stream or sys.stdout
        color = self._color if self._color is not None else stream.isatty()
        stream.write(render_card(alert, color=color) + "\n")
        stream.flush()

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return {"card": render_group_card(notification)}

    async def send_group(self, notification: Notification) -> None:
        stream = self._stream or sys.stdout
        color = self._color if self._color is not None else stream.isatty()
        stream.write(render_group_card(notification, color=color) + "\n")
        stream.flush()


class ConsoleSinkSettings(SinkSettingsBase):
    type: Literal["console"] = Field(description="Sink type.")
    color: bool | None = Field(default=None, description="Colours on the console (default: when stdout is a terminal).")


def _build(settings: ConsoleSinkSettings, ctx: SinkContext) -> ConsoleSink:
    return ConsoleSink(settings.name, ctx.stdout, settings.color)


PLUGIN = SinkPlugin(
    settings=ConsoleSinkSettings,
    build=_build,
    ledger=False,  # a print is not remembered
    default=lambda: ConsoleSinkSettings(name="console", type="console"),
    as_text=lambda body: card if isinstance(card := body.get("card"), str) else None,
)
