"""The walk of one dead letter through the code: which files it passes, how often it comes back.

    python -m bench.walk                 # the walk from the drain's `_process_and_release` to the hand-off
    python -m bench.walk --show          # ... and the files in order

One distinct failure is drained in process (embedded Redis, fallback summaries, the console sink),
with a profile hook on the entry's own task and the intake threads. Every call into a `bridge/`
function, and every return to a `bridge/` caller, moves the walk to that function's file; a
coroutine suspending (an await that waits) moves nothing. The summarizer counts as one stop (its
own calls run in tasks of their own). Calls into the data that flows and its helpers (`core/`),
settings and key names do not move the walk unless `--helpers` is given. Printed: the stays
(runs of one file), the files, the returns (a stay in a file already left once), from the claimed
entry to the end of `HandOff.finish`.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from bench.common import bench_redis_url, bench_settings, distinct_entry, push_entries

ROOT = Path(__file__).resolve().parents[1] / "bridge"
RETURN = dis.opmap["RETURN_VALUE"]
# What any line may call without the walk moving on: the data that flows and its helpers (core/),
# settings read, key names. `--helpers` counts them too.
HELPERS = ("bridge/core/", "bridge/config/", "bridge/settings.py", "bridge/runtime.py", "bridge/stores/keys.py",
           "bridge/sinks/sink_settings.py")
START, END = "_process_and_release", "finish"


def _file(frame: FrameType) -> str | None:
    path = frame.f_code.co_filename
    return str(Path(path).relative_to(ROOT.parent)) if path.startswith(str(ROOT)) else None


def _suspended(frame: FrameType) -> bool:
    """A coroutine frame giving control back to the loop (not a real return)."""
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] != RETURN


class Walk:
    """Files in the order the entry's code runs in them."""

    def __init__(self, summarizer_as_one: bool, helpers: bool) -> None:
        self.files: list[str] = []
        self._helpers = helpers
        self.entry_task: asyncio.Task[Any] | None = None
        self.done = False
        self._fold = summarizer_as_one

    def _visit(self, name: str | None) -> None:
        if name is None or self.done or (not self._helpers and name.startswith(HELPERS)):
            return
        if self._fold and name.startswith("bridge/summarize/"):
            name = "bridge/summarize/ (one stop)"
        if not self.files or self.files[-1] != name:
            self.files.append(name)

    def _ours(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return self.entry_task is not None
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return False
        if task is not None and self.entry_task is None and START in repr(task.get_coro()):
            self.entry_task = task
        return task is not None and task is self.entry_task

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return") or not self._ours():
            return
        if event == "call":
            self._visit(_file(frame))
            return
        if _suspended(frame):
            return
        if frame.f_code.co_name == END and _file(frame) == "bridge/stores/handoff.py":
            self.done = True
            return
        if frame.f_back is not None:
            self._visit(_file(frame.f_back))


def measure(fold: bool, helpers: bool) -> list[str]:
    from bench.common import drain

    url, server = bench_redis_url(12)
    try:
        push_entries(url, "dead_letter:walk", [distinct_entry(1, "walk")])
        settings = bench_settings(url, '[[sinks]]\nname = "console"\ntype = "console"\n')
        walk = Walk(fold, helpers)
        hook: Callable[[FrameType, str, Any], None] = walk.hook
        threading.setprofile(hook)  # type: ignore[arg-type]
        sys.setprofile(hook)  # type: ignore[arg-type]
        try:
            asyncio.run(drain(settings))
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        return walk.files
    finally:
        if server is not None:
            server.stop()


def report(files: list[str], show: bool, label: str) -> None:
    seen: set[str] = set()
    returns = 0
    for name in files:
        returns += name in seen
        seen.add(name)
    print(f"{label}: {len(files)} stays in {len(seen)} files, {returns} returns to a file already left")
    if show:
        for name in files:
            print(f"    {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="list the files in order")
    parser.add_argument("--helpers", action="store_true", help="count core/, config/, settings and key names too")
    args = parser.parse_args()
    report(measure(True, args.helpers), args.show, "claim to hand-off, the summarizer as one stop")


if __name__ == "__main__":
    main()
