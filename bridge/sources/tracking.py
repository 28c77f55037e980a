"""Which DLQ lists one consumer serves, and in what order (docs/design.md, section 2).

Pure bookkeeping, no Redis: the list source feeds it what `SCAN` found and
what each claim returned.

- *Hot* sources gave an entry (or were found by the last scan): the claim loop
  tries each in turn. A hot source that answers nothing turns *cold*.
- *Cold* sources (drained lists; Redis deletes an empty list) stay tracked for
  `sticky_s` so their next entry is claimed quickly: a few are probed each idle
  round, and one is blocked on. A rescan turns every non-empty list hot again,
  so idle work does not grow with the number of drained DLQs.
- At most `max_sources` are tracked. Lists found beyond that are counted as
  *waiting* (shown in /healthz and a metric) and admitted in turns: a ring over
  a hash of the key name moves on each scan, cold sources make room first,
  and when every tracked source is busy a tenth of them (the longest served)
  are rotated out per scan. None is dropped and none waits forever.
"""

from __future__ import annotations

import heapq
import zlib
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

RING = 2**32


@dataclass
class Tracked:
    since: float  # when it was admitted
    last_seen: float  # when a scan last found it non-empty (or a claim got an entry)


def ring_hash(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogateescape"))


class SourceTracker:
    """Hot and cold DLQs under a cap; see the module docstring."""

    def __init__(self, max_sources: int, sticky_s: float) -> None:
        self.max_sources = max_sources
        self.sticky_s = sticky_s
        self._tracked: dict[str, Tracked] = {}
        self._hot: deque[str] = deque()
        self._cold: deque[str] = deque()
        self._is_hot: set[str] = set()
        self._ring = 0
        self.waiting = 0
        self.present: set[str] = set()  # tracked sources the last scan found non-empty

    @property
    def sources(self) -> list[str]:
        return list(self._tracked)

    @property
    def hot_count(self) -> int:
        return len(self._hot)

    def next_hot(self) -> str:
        source = self._hot.popleft()
        self._hot.append(source)
        return source

    def next_cold(self) -> str:
        source = self._cold.popleft()
        self._cold.append(source)
        return source

    def probe_batch(self, size: int) -> list[str]:
        """Up to `size` cold sources in turn, always leaving one to block on."""
        return [self.next_cold() for _ in range(min(size, len(self._cold) - 1))]

    def cold_count(self) -> int:
        return len(self._cold)

    def heat(self, source: str, now: float) -> None:
        entry = self._tracked.get(source)
        if entry is None:
            return
        entry.last_seen = now
        if source not in self._is_hot:
            self._cold.remove(source)
            self._hot.append(source)
            self._is_hot.add(source)

    def cool(self, source: str) -> None:
        if source in self._is_hot:
            self._hot.remove(source)
            self._is_hot.discard(source)
            self._cold.append(source)
        self.present.discard(source)

    def scan(self, found: Iterable[str], now: float) -> None:
        """Apply one full SCAN: `found` are the non-empty lists (tracked or not)."""
        scan = self.begin_scan()
        for key in found:
            scan.see(key)
        self.end_scan(scan, now)

    def begin_scan(self) -> ScanRound:
        """A scan fed key by key: memory stays bounded by `max_sources`, whatever the keyspace."""
        return ScanRound(self, self._ring)

    def end_scan(self, scan: ScanRound, now: float) -> None:
        found_tracked = scan.found_tracked
        for source in found_tracked:
            self.heat(source, now)
        self.present = set(found_tracked)
        for source in [s for s, t in self._tracked.items() if now - t.last_seen >= self.sticky_s]:
            self._drop(source)
        untracked = scan.untracked
        rotated_out = self._make_room(untracked, found_tracked) if untracked else 0
        room = max(0, self.max_sources - len(self._tracked))
        admitted = list(dict.fromkeys(key for _dist, key in scan.nearest()))[:room]  # SCAN may repeat a key
        if admitted:
            self._ring = (ring_hash(admitted[-1]) + 1) % RING
        for source in sorted(admitted):
            self._tracked[source] = Tracked(since=now, last_seen=now)
            self._hot.append(source)
            self._is_hot.add(source)
            self.present.add(source)
        self.waiting = untracked + rotated_out - len(admitted)

    def is_tracked(self, source: str) -> bool:
        return source in self._tracked

    def _make_room(self, wanted: int, busy: set[str]) -> int:
        """Cold sources leave first; then, if others still wait, the longest-served busy ones (counted)."""
        missing = wanted - (self.max_sources - len(self._tracked))
        cold = sorted((t.last_seen, s) for s, t in self._tracked.items() if s not in busy)
        for _seen, source in cold[: max(0, missing)]:
            self._drop(source)
        missing = wanted - (self.max_sources - len(self._tracked))
        if missing <= 0:
            return 0
        quota = min(missing, max(1, self.max_sources // 10))
        rotated = sorted((self._tracked[s].since, s) for s in busy if s in self._tracked)[:quota]
        for _since, source in rotated:
            self._drop(source)
        return len(rotated)

    def _drop(self, source: str) -> None:
        del self._tracked[source]
        self.present.discard(source)
        if source in self._is_hot:
            self._hot.remove(source)
            self._is_hot.discard(source)
        else:
            self._cold.remove(source)


class ScanRound:
    """What one SCAN found: tracked sources, and the untracked ones nearest after the ring position."""

    def __init__(self, tracker: SourceTracker, ring: int) -> None:
        self._tracker = tracker
        self._ring = ring
        self.found_tracked: set[str] = set()
        self.untracked = 0
        self._heap: list[tuple[int, str]] = []  # max-heap by ring distance (negated), at most max_sources

    def see(self, key: str) -> None:
        tracker = self._tracker
        if tracker.is_tracked(key):
            self.found_tracked.add(key)
            return
        self.untracked += 1
        item = (-((ring_hash(key) - self._ring) % RING), key)
        if len(self._heap) < tracker.max_sources:
            heapq.heappush(self._heap, item)
        elif item > self._heap[0]:
            heapq.heapreplace(self._heap, item)

    def nearest(self) -> list[tuple[int, str]]:
        """(distance, key), nearest first."""
        return sorted((-neg, key) for neg, key in self._heap)
