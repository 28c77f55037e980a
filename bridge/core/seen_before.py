"""Seen before: what the bridge remembers of one cause (docs/design.md, section 5e).

Every alert carries the history of its cause fingerprint (`bridge.intake.cause`) as it stood when the
dead letter arrived: when the cause was first and last seen, how many of its failures arrived in the
last 30 days, and what operators did last time (redriven, silenced, …) with how that went. The store
(`bridge.stores.seen_before`) keeps it bounded and expiring; this module is the value and its words.

Operator notes and names are untrusted text: cut to one line and a bounded length, and given to the
model only inside the JSON of a marked data block, never as instructions.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from bridge.core.untrusted import strip_invisible

NOTE_CHARS = 200
WHO_CHARS = 100
WINDOW_DAYS = 30

ActionKind = Literal["redriven", "retried", "silenced"]
Verdict = Literal["failed_again", "held", ""]


def one_line(text: str, limit: int) -> str:
    """Untrusted text as one short line: invisible characters dropped, whitespace folded, cut."""
    text = " ".join(strip_invisible(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class LastAction(BaseModel):
    """What an operator did to the cause's jobs last time, and how it went (`verdict`, judged when the
    cause next failed: within the window `failed_again`, later `held`; "" not yet known)."""

    model_config = ConfigDict(frozen=True)

    kind: ActionKind
    at: float
    who: str = ""
    note: str = ""
    verdict: Verdict = ""

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        return one_line(value, NOTE_CHARS)

    @field_validator("who")
    @classmethod
    def _who(cls, value: str) -> str:
        return one_line(value, WHO_CHARS)


class SeenBefore(BaseModel):
    """The cause's history before this alert. `times_30d` counts earlier failures only."""

    model_config = ConfigDict(frozen=True)

    cause: str
    first_at: float
    last_at: float
    times_30d: int
    last_action: LastAction | None = None
    redrives_failed_again: int = 0
    redrives_held: int = 0

    def line(self, now: float | None = None) -> str:
        """One plain sentence for a card, a page or a digest."""
        when = f"first {_day(self.first_at)}, last {_ago(self.last_at, now)}"
        text = f"Seen before: {self.times_30d} time{'' if self.times_30d == 1 else 's'} in 30 days ({when})."
        action = self.last_action
        if action is not None:
            text += f" Last time: {action_words(action, now)}."
        tried = self.redrives_failed_again + self.redrives_held
        if self.redrives_failed_again and tried > 1:
            text += f" Redrive alone did not help {self.redrives_failed_again} of the last {tried} times."
        return text

    def for_model(self) -> dict[str, object]:
        """The facts the model is shown (inside a marked data block; `note` is untrusted text)."""
        facts: dict[str, object] = {
            "seen_before": True,
            "first_seen": _iso(self.first_at),
            "last_seen": _iso(self.last_at),
            "failures_last_30_days": self.times_30d,
            "redrives_that_failed_again": self.redrives_failed_again,
            "redrives_that_held": self.redrives_held,
        }
        if self.last_action is not None:
            action = self.last_action
            facts["last_action"] = {
                "what": action.kind,
                "at": _iso(action.at),
                "outcome": action.verdict or "unknown",
                "operator_note": action.note,
            }
        return facts


def action_words(action: LastAction, now: float | None = None) -> str:
    who = f" by {action.who}" if action.who else ""
    words = f"{action.kind}{who} {_ago(action.at, now)}"
    if action.verdict == "failed_again":
        words += ", failed again"
    elif action.verdict == "held":
        words += ", held (no failure for a while after)"
    if action.note:
        words += f' (note: "{action.note}")'
    return words


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ago(at: float, now: float | None) -> str:
    seconds = max((time.time() if now is None else now) - at, 0.0)
    if seconds < 120:
        return "just now"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size * (2 if unit == "day" else 1):
            count = int(seconds // size)
            return f"{count} {unit}{'s' if unit == 'day' and count != 1 else ''} ago"
    return "just now"
