"""Console sink: a readable incident card on stdout (the default sink)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from bridge.models import Alert

_COLORS = {"critical": "\033[1;31m", "error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}
_RESET = "\033[0m"


def render_card(alert: Alert, *, color: bool = False) -> str:
    """The card as text: title, severity, queue, job, attempts, cause, steps, runbook."""
    dl, summary = alert.dead_letter, alert.summary
    severity = alert.severity.value.upper()
    if color:
        severity = f"{_COLORS[alert.severity.value]}{severity}{_RESET}"
    if summary.severity is not alert.severity:
        severity += f"  (assessed {summary.severity.value})"
    source = summary.source.value
    if summary.fallback_reason:
        source += f" ({summary.fallback_reason})"
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
    lines.append(f"│ cause      {summary.likely_cause}")
    lines.extend(f"│ step {i}     {step}" for i, step in enumerate(summary.next_steps, 1))
    runbook = alert.runbook_url or summary.runbook_hint or "-"
    lines.append(f"│ runbook    {runbook}")
    lines.append(f"│ summary    {source}")
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
