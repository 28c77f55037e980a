"""Loopback ports for the servers the tests start, one block of ports per pytest-xdist worker.

The suite runs in parallel workers (docs/testing.md), each starting its own Redis, receivers,
brokers and bridges. A port found by binding port 0 comes from the kernel's ephemeral range,
which every process on the machine shares: two workers could be handed the same port between
`free_port()` and the server binding it, and a port a test keeps closed on purpose (a refused
connection) could be taken by another worker's server meanwhile. So the test servers take their
ports below the ephemeral range, from a block of their own: worker `gwN` of M draws from the
N-th of M equal slices of `FIRST..LAST`, never hands out one port twice while the block lasts,
and checks each port is free. A run without workers draws from the whole range.

Redis Cluster nodes (tests/support/redis_cluster.py) use 20000-29999 and their bus ports
30000-39999, outside these blocks.
"""

from __future__ import annotations

import random
import socket

from tests.support import workers

FIRST = 10000
LAST = 20000  # exclusive

_handed: set[int] = set()


def worker_block() -> range:
    """This process's ports: its xdist worker's slice, or the whole range outside xdist."""
    size = (LAST - FIRST) // workers.count()
    start = FIRST + workers.index() * size
    return range(start, start + size)


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port no server of this run uses, from this worker's block."""
    block = worker_block()
    if len(_handed) >= len(block) // 2:
        _handed.clear()  # the block went round: the earliest ports' servers are long gone
    while True:
        port = random.choice(block)
        if port not in _handed and bindable(port):
            _handed.add(port)
            return port
