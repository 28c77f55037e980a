"""The console browser tests' tab: a fresh Chromium profile that fails the test on any dialog,
uncaught script error or Content-Security-Policy violation (tests/support/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import Tab, open_tab


@pytest.fixture
def tab() -> Iterator[Tab]:
    with open_tab() as opened:
        yield opened
        assert not opened.dialogs, f"a page opened a dialog: {opened.dialogs}"
        assert not opened.page_errors, f"a page script failed: {opened.page_errors}"
        assert not opened.csp_violations(), f"the page broke its own CSP: {opened.csp_violations()}"


@pytest.fixture(scope="module")
def console_extra() -> dict[str, Any]:
    """More `[console]` settings for a module's bridge (tests/console/test_browser.py); a module overrides it."""
    return {}
