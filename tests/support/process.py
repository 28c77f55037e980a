"""Stopping a child process started in its own session: SIGTERM to its group, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(process: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
