"""Fleet-wide rate limits: N replica processes hammering one Slack-like receiver.

The receiver takes one message per second: an arrival less than 1 s after the
previous accepted one is answered 429 with `Retry-After: 1`, as Slack does.
Each of `--processes` processes (tests/support/deliver_child.py: routes, ledger
and limiter built as the runtime builds them) delivers `--messages` alerts at
once. Prints arrivals per second at the receiver (the most in any sliding 1 s
window and in any calendar second), the smallest gap, the 429s provoked and
the rate-limit waits the processes counted.

    python -m bench.bench_fleet_limits [--processes 3] [--messages 10] [--rate 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fastapi import FastAPI, Request, Response

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_redis_url
from tests.support.http_server import serve

ROOT = Path(__file__).resolve().parent.parent


class SlackLike:
    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second
        self.last_ok = -1e9
        self.arrivals: list[float] = []
        self.limited = 0
        self.app = FastAPI()
        self.app.add_api_route("/hook", self.hook, methods=["POST"])

    async def hook(self, _request: Request) -> Response:
        now = time.time()
        if now - self.last_ok < self.interval:
            self.limited += 1
            return Response("rate_limited", status_code=429, headers={"Retry-After": "1"})
        self.last_ok = now
        self.arrivals.append(now)
        return Response("ok")


def max_in_window(times: list[float], window_s: float = 1.0) -> int:
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window_s) - i for i, t in enumerate(ordered)), default=0)


async def run(processes: int, messages: int, rate: float) -> None:
    redis_url, server = bench_redis_url()
    receiver = SlackLike(rate)
    try:
        async with serve(receiver.app) as url:
            config = Path(tempfile.mkdtemp()) / "bridge.toml"
            config.write_text(
                f'[redis]\nurl = "{redis_url}"\nconsumer_id = "bench"\n'
                "[delivery]\nbase_delay_s = 0.05\nmax_delay_s = 1.0\nmax_attempts = 20\n"
                f'[[sinks]]\nname = "slack"\ntype = "slack"\nurl = "{url}/hook"\n'
                f"messages_per_second = {rate}\n"
            )
            started = time.monotonic()
            children = [await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.support.deliver_child", str(config), "slack", f"p{n}",
                str(messages), cwd=ROOT, stdout=asyncio.subprocess.PIPE) for n in range(processes)]
            outs = await asyncio.gather(*(c.communicate() for c in children))
            elapsed = time.monotonic() - started
    finally:
        if server is not None:
            server.stop()
    reports = [json.loads(out.splitlines()[-1]) for out, _ in outs]
    arrivals = sorted(receiver.arrivals)
    per_second = Counter(int(t) for t in arrivals)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    print(f"{processes} processes x {messages} messages, receiver limit {rate:g}/s, {elapsed:.1f}s")
    print(f"  delivered: {sum(r['outcomes'].count('delivered') for r in reports)} "
          f"of {processes * messages}; accepted at the receiver: {len(arrivals)}")
    print(f"  max arrivals in any sliding 1 s window: {max_in_window(arrivals)}; "
          f"in any calendar second: {max(per_second.values(), default=0)}; "
          f"smallest gap: {min(gaps, default=0):.3f}s; mean rate: "
          f"{(len(arrivals) - 1) / max(arrivals[-1] - arrivals[0], 1e-9):.3f}/s")
    print(f"  429s provoked: {receiver.limited}")
    print("  rate-limit waits per process: "
          + ", ".join(f"{r['waits']:.0f} ({r['wait_seconds']:.1f}s)" for r in reports))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--rate", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(run(args.processes, args.messages, args.rate))


if __name__ == "__main__":
    main()
