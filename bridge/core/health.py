"""Health state that components report into and `/healthz` reads."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"  # shown, but the bridge still does its job (LLM, a sink)
    FAILING = "failing"  # the bridge cannot do its job (Redis, a stalled loop)


@dataclass
class Check:
    status: Status
    detail: str = ""


class Health:
    """Named checks; `/healthz` is 503 while any check is FAILING."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def set(self, name: str, status: Status, detail: str = "") -> None:
        self._checks[name] = Check(status, detail)

    def get(self, name: str) -> Check | None:
        return self._checks.get(name)

    def snapshot(self) -> dict[str, dict[str, str]]:
        return {
            name: {"status": c.status.value, "detail": c.detail} if c.detail else {"status": c.status.value}
            for name, c in sorted(self._checks.items())
        }

    def failing(self) -> bool:
        return any(c.status is Status.FAILING for c in self._checks.values())
