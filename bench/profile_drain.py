"""Where the CPU of one in-process drain goes, by part (the rows of docs/benchmarks.md).

    py-spy record --native --format raw -o /tmp/drain.txt -- python -m bench.profile_drain --entries 4000
    python -m bench.profile_drain --breakdown /tmp/drain.txt --entries 4000 --cpu-ms 4.48

The first line drains `--entries` distinct failures (instant local peers, the bench
settings of bench_throughput) under py-spy. The second reads the collapsed stacks and
charges each busy sample (threads waiting and start-up are left out) to one part: the first frame,
from the root, of a library or bridge module of a known part (so JSON inside httpx is
HTTP); the event loop when asyncio/uvloop frames come after the last bridge frame
(the loop itself, or bridge code calling into asyncio); garbage collection
wherever it interrupts. The shares are scaled to the CPU ms/entry bench_throughput
measured (`--cpu-ms`).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

PARTS: list[tuple[str, re.Pattern[str]]] = [
    ("garbage collector", re.compile(r"gc_collect|collect_generations|gc_collect_main|_PyGC_")),
    ("HTTP (httpx)", re.compile(r"[(/]httpx/|[(/]httpcore/")),
    ("HTTP (aiohttp)", re.compile(r"[(/]httpx_aiohttp/|[(/]aiohttp/|[(/]multidict/|[(/]yarl/")),
    ("Redis (redis-py)", re.compile(r"[(/]redis/|hiredis")),
    ("redaction", re.compile(r"bridge/redact|bridge/secret_patterns|[(/]re2")),
    ("JSON", re.compile(r"[(/]json/|orjson")),
    ("tenacity", re.compile(r"[(/]tenacity/")),
    ("pydantic", re.compile(r"[(/]pydantic|pydantic_core")),
    ("metrics", re.compile(r"[(/]prometheus_client/")),
    ("asyncio / event loop", re.compile(r"[(/]asyncio/|uvloop|loop\.c:|_asynciomodule")),
]
START_UP = re.compile(r"_find_and_load|freeze_heap|open_runtime|PeersProcess|push_entries")
IDLE = re.compile(r"epoll_p?wait|SimpleQueue_get|pthread_cond_timedwait|PyThread_acquire_lock_timed|"
                  r"_wait_for_tstate_lock|Event\.wait \(threading")


def part_of(stack: str) -> str:
    frames = stack.split(";")
    if any(PARTS[0][1].search(f) for f in frames):
        return PARTS[0][0]
    last_loop = last_bridge = -1
    for index, frame in enumerate(frames):
        for name, pattern in PARTS[1:-1]:
            if pattern.search(frame):
                return name
        if PARTS[-1][1].search(frame):
            last_loop = index
        elif "bridge/" in frame:
            last_bridge = index
    return PARTS[-1][0] if last_loop > last_bridge else "bridge and the rest"


def breakdown(path: Path, entries: int, cpu_ms: float) -> None:
    parts: Counter[str] = Counter()
    idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if IDLE.search(stack):
            idle += int(count)
            continue
        if START_UP.search(stack):  # imports, start-up and the bench's own set-up: not per entry
            continue
        parts[part_of(stack)] += int(count)
    total = sum(parts.values())
    print(f"{total} busy samples ({idle} idle), {entries} entries, shares of {cpu_ms:.2f} ms CPU/entry")
    for name, n in parts.most_common():
        print(f"  {name:<24} {n / total * cpu_ms * 1000:6.0f} µs/entry  {n / total:5.1%}")


def drain(entries: int) -> None:
    from bench.bench_throughput import push
    from bench.common import bench_redis_url, bench_settings, peers_toml, run
    from bench.common import drain as drain_settings
    from bench.peers import PeersProcess

    url, server = bench_redis_url(13)
    try:
        with PeersProcess() as peers:
            push(url, "profile", entries)
            settings = bench_settings(url, peers_toml(peers.url))
            seconds = run(drain_settings(settings))
            print(f"{entries} entries in {seconds:.2f} s")
    finally:
        if server:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=4000)
    parser.add_argument("--breakdown", type=Path, help="a py-spy raw file to read instead of draining")
    parser.add_argument("--cpu-ms", type=float, default=1.0,
                        help="measured CPU ms/entry (bench_throughput) the sample shares are scaled to")
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.breakdown, args.entries, args.cpu_ms)
    else:
        drain(args.entries)


if __name__ == "__main__":
    main()
