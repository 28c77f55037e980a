"""Print why a kind's tests were skipped (a missing tool skips only its own kind, with the reason)."""

from __future__ import annotations

from typing import Any

import pytest

_REASONS: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "tests/kinds/" in report.nodeid and isinstance(report.longrepr, tuple):
        _REASONS.setdefault(str(report.longrepr[2]).removeprefix("Skipped: "), report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for reason in sorted(_REASONS):
        terminalreporter.write_line(f"kind tests skipped: {reason}")
