"""Peak RSS and time of the intake of one oversized entry (its identity read streaming).

    python bench/bench_identity.py [--mb 20]

Prints the figures; runs the intake in a fresh process per size so each peak is its own.
Target (docs/design.md, section 3): under 150 MB of peak RSS for a 20 MB entry.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_entry(path: Path, megabytes: int) -> None:
    raw = json.dumps({"payload": {"rows": ["x" * 1000] * (megabytes * 1000)}, "job_id": f"big-{megabytes}",
                      "job_name": "ImportBatch", "attempts": 4, "last_error": "MemoryError: too large"}).encode()
    path.write_bytes(raw)


def one(path: Path) -> None:
    """In a fresh process: the entry's bytes read (as from Redis), then its intake."""
    from bridge.intake import normalize

    raw = path.read_bytes()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    letter = normalize(raw, "dead_letter:imports")
    took = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(raw) / 1e6:6.1f} MB entry: job_id={letter.job_id} intake {took * 1000:.0f} ms, "
          f"peak RSS {peak:.0f} MB ({before:.0f} MB with the entry read, before its intake)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="*", default=[2, 20, 50])
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for megabytes in args.mb:
            path = Path(tmp) / f"{megabytes}.json"
            write_entry(path, megabytes)
            subprocess.run([sys.executable, __file__, "--one", str(path)], check=True)


if __name__ == "__main__":
    main()
