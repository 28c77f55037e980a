"""Which pytest-xdist worker this process is (docs/testing.md: the suite runs in parallel workers).

Each worker is a process of its own with its own session fixtures (its own Redis, cluster,
gateway...); what a worker must still keep apart from the others (ports, a named Redis database)
is keyed on its index.
"""

from __future__ import annotations

import os


def count() -> int:
    """How many workers run the suite: 1 without xdist."""
    return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))


def index() -> int:
    """This worker's index, 0..count()-1 (gw0 is 0); 0 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name.removeprefix("gw")) % count() if name.startswith("gw") else 0


WORKERS_ENV = "DLQ_BRIDGE_TEST_WORKERS"
PER_CORE = 2  # most of a test's time is spent waiting on a peer, a timer or a child process


def wanted() -> int:
    """How many workers `-n auto` starts: $DLQ_BRIDGE_TEST_WORKERS, else PER_CORE per usable core."""
    given = os.environ.get(WORKERS_ENV, "")
    if given.isdigit():
        return int(given)
    return PER_CORE * len(os.sched_getaffinity(0))
