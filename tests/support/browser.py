"""Headless Chromium from Debian's packages (scripts/install-browser), driven by playwright's Python package.

Playwright never downloads a browser here: it launches `/usr/bin/chromium` with
a fresh profile directory. Each `Tab` records what a hostile page could make
the browser do: JavaScript dialogs, uncaught errors and console errors
(Content-Security-Policy violations show up there).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here; None when they can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (Debian package chromium; run scripts/install-browser)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright's Python package is missing (pip install -e '.[test]')"
    return None


@dataclass
class Tab:
    """One page of a fresh browser profile, and what happened in it."""

    page: Any
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def csp_violations(self) -> list[str]:
        return [m for m in self.console_errors if "Content Security Policy" in m]


@contextlib.contextmanager
def open_tab(viewport: tuple[int, int] = (1280, 860)) -> Iterator[Tab]:
    """Launch Chromium on a new profile directory; yield one recording tab; close and delete it all."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="dlqb-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=ARGS,
                viewport={"width": viewport[0], "height": viewport[1]},
            )
            try:
                tab = Tab(context.pages[0] if context.pages else context.new_page())
                _record(tab)
                yield tab
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _record(tab: Tab) -> None:
    def on_dialog(dialog: Any) -> None:
        tab.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def on_console(message: Any) -> None:
        if message.type == "error":
            tab.console_errors.append(message.text)

    tab.page.on("dialog", on_dialog)
    tab.page.on("pageerror", lambda error: tab.page_errors.append(str(error)))
    tab.page.on("console", on_console)
