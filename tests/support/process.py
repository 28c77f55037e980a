"""Stopping a child process started in its own session: SIGTERM to its group, then SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (Linux /proc), whatever session they moved to."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(entry))
    return found


def stop_group(process: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """Stop the group; children that left it for a session of their own (OpenClaw's spawn broker
    does) are killed too, or they would outlive every test run."""
    strays = [pid for pid in children(process.pid) if _group(pid) != process.pid] if process.poll() is None else []
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for pid in strays:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _group(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1
