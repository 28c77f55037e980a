"""`DLQ_BRIDGE_TEST_REQUIRE_PEERS=1` (set by .ci/run): a test skipped for a missing peer fails instead.

The kind tests are the proof of the kind rows in docs/guarantees.md, and the real-Alertmanager
tests the proof of the Alertmanager sink; on a fresh machine (README command 2) a missing peer
skips and says why, but CI installs them (scripts/install-peers), so there a skip would hide a
broken install. The switch covers exactly what install-peers installs: a skip whose reason names
it as the fix (`INSTALL_HINT`). Peers CI does not install (the RabbitMQ broker the machine runs,
the OpenClaw gateway, the browser) still skip.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_PEERS = "DLQ_BRIDGE_TEST_REQUIRE_PEERS"
INSTALL_HINT = "run scripts/install-peers"


def peers_required() -> bool:
    return os.environ.get(REQUIRE_PEERS, "") == "1"


def fail_a_peer_skip(report: pytest.TestReport) -> None:
    """Turn a skip for a peer install-peers provides into a failure, when the switch is on."""
    if not (report.skipped and peers_required() and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2])
    if INSTALL_HINT in reason:
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_PEERS}=1 and a peer is missing: {reason}"
