"""Peak RSS and time of the intake of entries over `max_parse_bytes` (the streamed identity read).

Each case runs in its own child process: it builds the entry, notes its RSS high-water mark
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`, the entry's own bytes included), runs the whole
intake (`bridge.intake.chain.normalize`: streamed read → redact → fingerprint) and prints the peak and
the time per MB. Target (issue 21): peak RSS under 150 MB for a 20 MB entry.

    python -m bench.bench_oversized [--sizes 2,20]

Shapes: `fields-first` (the read stops after the fields), `fields-last` (it streams through
20 MB of nested payload first), `one-string` (a single string value as big as the entry before
the fields: the parser holds that one token whole, the worst case for memory).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from bridge.intake.streamed_fields import backend

MB = 1024 * 1024
SHAPES = ("fields-first", "fields-last", "one-string")
FIELDS = {"job_id": "bench-job", "job_name": "Bench", "queue": "q", "attempts": 3, "last_error": "E: boom"}


def entry(shape: str, size_mb: int) -> bytes:
    """Built as bytes, so the child's RSS before the intake is the entry, not a Python structure."""
    fields = json.dumps(FIELDS).encode()[1:-1]
    if shape == "one-string":
        return b'{"blob": "' + b"s" * (size_mb * MB) + b'", ' + fields + b"}"
    row = json.dumps({"row": 1, "cells": ["c" * 20] * 10}).encode()
    nested = b"[" + b",".join([row] * (size_mb * MB // len(row) + 1)) + b"]"
    if shape == "fields-first":
        return b"{" + fields + b', "payload": ' + nested + b"}"
    return b'{"payload": ' + nested + b", " + fields + b"}"


def child(shape: str, size_mb: int) -> None:
    from bridge.intake.chain import normalize

    raw = entry(shape, size_mb)
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    dead_letter = normalize(raw, "dead_letter:bench", max_parse_bytes=MB)
    took = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"job_id": dead_letter.job_id, "bytes": len(raw), "before_mb": before_kb / 1024,
                      "peak_mb": peak_kb / 1024, "s": took}))


def run_case(shape: str, size_mb: int) -> dict[str, float | str]:
    out = subprocess.run([sys.executable, "-m", "bench.bench_oversized", "--child", shape, str(size_mb)],
                         capture_output=True, text=True, check=True).stdout
    found: dict[str, float | str] = json.loads(out.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2,20", help="entry sizes in MB, comma-separated")
    parser.add_argument("--child", nargs=2, metavar=("SHAPE", "MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    print(f"ijson backend: {backend().backend_name}")
    print(f"{'shape':<13} {'MB':>4} {'bytes':>10} {'job_id':<10} {'RSS before':>10} {'peak RSS':>9} "
          f"{'growth':>7} {'ms/MB':>7}")
    for size_mb in (int(s) for s in args.sizes.split(",")):
        for shape in SHAPES:
            r = run_case(shape, size_mb)
            size = float(r["bytes"]) / MB
            growth = float(r["peak_mb"]) - float(r["before_mb"])
            print(f"{shape:<13} {size_mb:>4} {int(r['bytes']):>10} {r['job_id']!s:<10} "
                  f"{float(r['before_mb']):>8.1f}MB {float(r['peak_mb']):>7.1f}MB {growth:>5.1f}MB "
                  f"{1000 * float(r['s']) / size:>7.2f}")


if __name__ == "__main__":
    main()
