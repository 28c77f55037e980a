"""Rolling upgrades and rollbacks between two releases, as an operator runs them, repeated.

Each run is the rollout of tests/support/rollout.py (two `old` replicas replaced one by one by `new`
ones under a steady stream of 400 dead letters over four queues, with kill -9 and SIGTERM, three
sinks answered by local receivers) on its own empty redis-server. A release is `checkout` (this
tree), `next` (this tree posing as its next release: bridge.core.formats.TEST_POSE_ENV), `previous`
(tests/compat/PREVIOUS_RELEASE) or any commit in git history (built into its own venv).

    python -m bench.bench_rolling_upgrade --runs 3 previous:checkout checkout:previous checkout:next next:checkout

Per pair, summed over the runs: jobs lost (never received) per sink, jobs received under two keys,
jobs received twice under one key (absorbed by the receiver's dedupe), items left in Redis,
undeliverable records, and runs with a traceback in any replica's log.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from tests.support.redis_server import start_private_redis
from tests.support.rollout import Outcome, Release, build_release, checkout, previous, roll


def release(name: str, tmp: Path) -> Release:
    if name == "checkout":
        return checkout()
    if name == "next":
        return checkout(pose_as_next=True)
    python = build_release(None if name == "previous" else name)
    return previous(python, tmp) if name == "previous" else Release(name, python, previous(python, tmp).cwd)


async def one_run(old: str, new: str) -> tuple[Outcome, float]:
    server = start_private_redis(appendonly=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            outcome = await roll(release(old, Path(tmp)), release(new, Path(tmp)), server.url, Path(tmp))
            return outcome, time.monotonic() - started
    finally:
        server.stop()


def row(pair: str, outcomes: list[tuple[Outcome, float]]) -> str:
    def total(field: str) -> str:
        sums: dict[str, int] = {}
        for outcome, _ in outcomes:
            for sink, n in getattr(outcome, field).items():
                sums[sink] = sums.get(sink, 0) + n
        return " ".join(f"{sink} {n}" for sink, n in sums.items())

    left = sum(o.left for o, _ in outcomes)
    undeliverable = sum(o.undeliverable for o, _ in outcomes)
    traced = sum(bool(o.tracebacks) for o, _ in outcomes)
    took = sum(s for _, s in outcomes) / len(outcomes)
    return (f"| {pair} | {len(outcomes)} | {total('lost')} | {total('twice')} | {total('again')} | {left} | "
            f"{undeliverable} | {traced} | {took:.0f} s |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", nargs="+", metavar="OLD:NEW")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("| old → new | runs | lost (per sink, of 400 a run) | under two keys | twice, one key | left in Redis | "
          "undeliverable | runs with a traceback | s a run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for pair in args.pairs:
        old, new = pair.split(":", 1)
        outcomes = [await one_run(old, new) for _ in range(args.runs)]
        print(row(f"{old} → {new}", outcomes), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
