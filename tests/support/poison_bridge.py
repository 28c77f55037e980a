"""`python -m tests.support.poison_bridge <dlq-bridge arguments>`: the real bridge, except that the
intake of an entry holding `POISON_MARK` kills the process with SIGKILL, as the kernel's OOM killer
kills a pod whose parse of one entry blew its memory limit. Nothing is caught: the process dies
mid-intake with everything it holds."""

from __future__ import annotations

import os
import signal

from bridge.cli import main
from bridge.core.models import DeadLetter
from bridge.drain import pipeline
from bridge.settings import SourcesSettings

POISON_MARK = b"POISON-PILL-KILLS-INTAKE"
_real_intake = pipeline.intake


def _dying_intake(raw: bytes, source_key: str, settings: SourcesSettings) -> DeadLetter:
    if POISON_MARK in raw:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_intake(raw, source_key, settings)


pipeline.intake = _dying_intake

if __name__ == "__main__":
    raise SystemExit(main())
