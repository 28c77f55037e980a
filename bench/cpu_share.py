"""Where a machine's CPU went during a window of a service bench: bridges, peers, Redis, the rest, idle.

A `Snapshot` reads the cumulative counters at one moment: the receiver's post count, each
bridge process's and the peers process's CPU (`/proc/<pid>/stat`), Redis's CPU (`INFO cpu`)
and the whole machine's busy and idle time (`/proc/stat`). Two snapshots give a `Share`
per entry delivered between them. "rest" is what the machine spent outside the bridges,
the peers and Redis (the bench's own polling, kernel threads, other programs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import redis

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def redis_cpu_s(url: str) -> float:
    """CPU seconds the Redis server has used (INFO cpu), children included."""
    client = redis.Redis.from_url(url)
    try:
        info = client.info("cpu")
    finally:
        client.close()
    return float(sum(v for k, v in info.items() if k.startswith("used_cpu_") and not k.endswith("_main_thread")))


def machine_cpu_s() -> tuple[float, float]:
    """(all, idle) CPU seconds of the machine since boot, summed over its cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values) / TICK, (values[3] + values[4]) / TICK  # idle + iowait


@dataclass(frozen=True)
class Snapshot:
    at: float
    posts: int
    bridges: float
    peers: float
    redis: float
    machine: float
    idle: float

    @classmethod
    def take(cls, at: float, posts: int, bridge_pids: list[int], peers_pid: int, redis_url: str) -> Snapshot:
        machine, idle = machine_cpu_s()
        bridges = sum(process_cpu_s(pid) for pid in bridge_pids)
        return cls(at, posts, bridges, process_cpu_s(peers_pid), redis_cpu_s(redis_url), machine, idle)


@dataclass(frozen=True)
class Share:
    """CPU milliseconds per entry delivered between two snapshots, and the rate."""

    entries: int
    rate: float
    bridges_ms: float
    peers_ms: float
    redis_ms: float
    rest_ms: float
    idle_ms: float

    @classmethod
    def between(cls, a: Snapshot, b: Snapshot) -> Share:
        n = b.posts - a.posts
        per = 1000 / n
        bridges, peers, redis_ = b.bridges - a.bridges, b.peers - a.peers, b.redis - a.redis
        idle = b.idle - a.idle
        rest = (b.machine - a.machine) - idle - bridges - peers - redis_
        return cls(n, n / (b.at - a.at), bridges * per, peers * per, redis_ * per, max(rest, 0.0) * per, idle * per)

    @property
    def busy_share(self) -> float:
        busy = self.bridges_ms + self.peers_ms + self.redis_ms + self.rest_ms
        return busy / (busy + self.idle_ms)

    def describe(self) -> str:
        return (f"{self.rate:,.0f} entries/s; CPU ms/entry: bridges {self.bridges_ms:.3f}, peers "
                f"{self.peers_ms:.3f}, Redis {self.redis_ms:.3f}, rest {self.rest_ms:.3f}, idle "
                f"{self.idle_ms:.3f} (machine {self.busy_share:.1%} busy)")
