"""Silence matching cost per entry with 0, 10 and 100 active silences (bridge.stores.silences).

What the hand-off pays per entry: `SilenceFilter.split` over the in-process copy (no Redis on
this path; the copy is refreshed once a second), three sinks, realistic silences: a third `=`
on queue, a third `=~` on queue and severity, a third `!=`/`!~` with a cause, none of which
matches the entries (the worst case: every silence is checked for every sink). Prints µs per
entry and the ratio to 0 silences (figures are ratios within one run).

    PYTHONPATH=. python bench/bench_silences.py [--entries 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bridge.core.silence_match import parse_matcher
from bridge.stores.silences import Silence, SilenceFilter, new_silence
from tests.support.receiver import make_alert

SINKS = {"slack": True, "pd": True, "hook": False}


class Fixed:
    """A store stand-in: the filter's copy is loaded once (what every second looks like)."""

    def __init__(self, silences: list[Silence]) -> None:
        self._silences = silences

    async def all(self) -> list[Silence]:
        return self._silences


def silences(count: int) -> list[Silence]:
    shapes = [
        lambda i: [f"queue=queue-{i}"],
        lambda i: [f'queue=~"batch-{i}-.*"', 'severity=~"warn.*"'],
        lambda i: [f"cause=fp{i}", "job_name!=x", f'source!~"dead_letter:tmp-{i}.*"'],
    ]
    return [new_silence([parse_matcher(t) for t in shapes[i % 3](i)], 0.0, 4e9, author="bench") for i in range(count)]


async def per_entry_us(count: int, entries: int) -> float:
    filt = SilenceFilter(Fixed(silences(count)), SINKS, refresh_s=1e9)  # type: ignore[arg-type]
    alerts = [make_alert(queue=f"orders-{i % 50}", job_id=f"j{i}", fingerprint=f"live{i % 7}") for i in range(200)]
    await filt.split(alerts[0], list(SINKS))
    start = time.perf_counter()
    for i in range(entries):
        await filt.split(alerts[i % len(alerts)], list(SINKS))
    return (time.perf_counter() - start) / entries * 1e6


async def main(entries: int) -> None:
    base = None
    print(f"silence matching, {entries} entries, 3 sinks each")
    for count in (0, 10, 100):
        cost = await per_entry_us(count, entries)
        base = base or cost
        print(f"  {count:>3} silences: {cost:8.2f} µs/entry  ({cost / base:5.1f}x of 0 silences)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=20000)
    asyncio.run(main(parser.parse_args().entries))
