"""The summarizer interface the pipeline depends on."""

from __future__ import annotations

from typing import Protocol

from bridge.core.models import DeadLetter, Summary
from bridge.core.seen_before import SeenBefore


class Summarizer(Protocol):
    async def summarize(self, dead_letter: DeadLetter, history: SeenBefore | None = None) -> Summary:
        """Always returns a Summary (falling back when it must); never raises. `history`: the cause's, shown
        to the model as data when it is asked (a cached summary was written with the history of its time)."""
        ...

    async def aclose(self) -> None: ...
