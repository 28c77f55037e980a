"""This release: its version (semver), as `--version`, `/healthz`, the heartbeat and
`dlq_bridge_build_info` say it (CHANGELOG.md; docs/operations.md, "Upgrades")."""

from __future__ import annotations

import os
from collections.abc import Mapping

from bridge import __version__
from bridge.core.formats import TEST_POSE_ENV, RecordFormat


def poses_as_next(environ: Mapping[str, str] = os.environ) -> bool:
    """Test-only: this replica poses as the next release (bridge.core.formats, TEST_POSE_ENV)."""
    return environ.get(TEST_POSE_ENV, "") == "1"


def version(pose_as_next: bool = False) -> str:
    """`0.2.0`; posing as the next release, the next minor version with `-next`."""
    if not pose_as_next:
        return __version__
    major, minor = __version__.split("-")[0].split(".")[:2]
    return f"{major}.{int(minor) + 1}.0-next"


def announcement(release: str, formats: RecordFormat) -> dict[str, object]:
    """What this replica's heartbeat says beside host, pid and time (bridge.stores.fleet)."""
    return {"version": release, "reads": formats.reads}
