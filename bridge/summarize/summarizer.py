"""The summarizer interface the pipeline depends on."""

from __future__ import annotations

from typing import Protocol

from bridge.core.models import DeadLetter, Summary


class Summarizer(Protocol):
    async def summarize(self, dead_letter: DeadLetter) -> Summary:
        """Always returns a Summary (falling back when it must); never raises."""
        ...

    async def aclose(self) -> None: ...
