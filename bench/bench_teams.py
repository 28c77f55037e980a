"""Teams pacing under a storm: 1,000 dead letters, 3 `dlq-bridge run` replicas, one Teams webhook.

The far end is a local Teams-like Workflows webhook with Teams' limit: at most 4 requests in any
sliding second; a request beyond is answered 429 with `Retry-After: 1` (Teams' own answer), and a
message over 28 KB is answered 400. Three replicas (distinct consumer ids, fallback summaries,
service defaults otherwise) share a private Redis and one `type = "teams"` sink. The entries are
LPUSHed at once, all of one cause. Two runs:

- `grouped`: the sink's default `group_by = "fingerprint"` (one card, then digests);
- `ungrouped`: `group_by = "none"`: one card per dead letter, so the pacing is what bounds it.

Prints, per run: cards accepted, 429s provoked, 400s, time to the first card, time to the last,
the most requests in any 1 s window, and the largest message.

    python -m bench.bench_teams [--entries 1000] [--observe 330] [--mode both|grouped|ungrouped]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import _free_port, bench_redis_url, read_body, service_config
from bridge.stores import keys
from tests.support.http_server import serve

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = 3
LIMIT_PER_S = 4
MAX_BYTES = 28 * 1024
SOURCE = "dead_letter:orders"


@dataclass
class TeamsLike:
    """A Workflows webhook with Teams' limits; raw ASGI, so it adds no latency of its own."""

    accepted: list[tuple[float, int]] = field(default_factory=list)  # (arrival, body bytes)
    arrivals: list[float] = field(default_factory=list)  # every request, accepted or not
    throttled: int = 0
    too_big: int = 0
    gone: int = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if not body:  # the client gave up before its body was read (its request timeout, on a loaded machine)
            self.gone += 1
            return
        status, headers = self.answer(body, time.time())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def answer(self, body: bytes, now: float) -> tuple[int, list[tuple[bytes, bytes]]]:
        recent = sum(1 for at, _ in self.accepted[-LIMIT_PER_S:] if now - at < 1.0)
        self.arrivals.append(now)
        if recent >= LIMIT_PER_S:
            self.throttled += 1
            return 429, [(b"retry-after", b"1")]
        if len(body) > MAX_BYTES:
            self.too_big += 1
            return 400, []
        json.loads(body)
        self.accepted.append((now, len(body)))
        return 202, []


def entry(i: int) -> bytes:
    return json.dumps({
        "queue": "orders", "job_id": f"order-{i}", "job_name": "ship_order", "attempts": 5,
        "last_error": f"TimeoutError: warehouse API timed out after 30s (order {i})",
        "payload_excerpt": json.dumps({"order": i}),
    }).encode()


def teams_toml(url: str, group_by: str) -> str:
    return f'[[sinks]]\nname = "teams"\ntype = "teams"\nurl = "{url}/workflows/x?sig=bench"\ngroup_by = "{group_by}"\n'


def max_in_window(times: list[float], window_s: float = 1.0) -> int:
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window_s) - i for i, t in enumerate(ordered)), default=0)


async def one_run(group_by: str, entries: int, observe_s: float) -> dict[str, Any]:
    redis_url, server = bench_redis_url(13)
    client = aioredis.Redis.from_url(redis_url)
    teams = TeamsLike()
    logs = Path(tempfile.mkdtemp(prefix="dlqb-teams-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await client.flushdb()
        async with serve(teams) as url:
            ports = [_free_port() for _ in range(REPLICAS)]
            for n, port in enumerate(ports):
                config = service_config(redis_url, port, f"teams-{n}", teams_toml(url, group_by))
                log = (logs / f"replica-{n}.log").open("wb")
                procs.append(subprocess.Popen([sys.executable, "-m", "bridge", "--config", str(config), "run"],
                                              cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
            await ready(ports)
            await client.lpush(SOURCE, *[entry(i) for i in range(entries)])
            pushed = time.time()
            await watch(client, teams, group_by, entries, pushed, observe_s)
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(timeout=30)
            archived = int(await client.llen(keys.alerted(SOURCE)))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        await client.aclose()
        if server is not None:
            server.stop()
    times = [at for at, _ in teams.accepted]
    return {
        "mode": group_by, "entries": entries, "archived": archived, "cards": len(teams.accepted),
        "throttled_429": teams.throttled, "too_big_400": teams.too_big, "gone_before_read": teams.gone,
        "first_card_s": round(min(times) - pushed, 2) if times else None,
        "last_card_s": round(max(times) - pushed, 2) if times else None,
        "max_requests_in_1s": max_in_window(teams.arrivals),
        "largest_bytes": max((size for _, size in teams.accepted), default=0),
    }


async def ready(ports: list[int], timeout_s: float = 120.0) -> None:
    """Until every replica answers `/livez` (the pipeline is running)."""
    deadline = time.time() + timeout_s
    async with httpx.AsyncClient() as http:
        for port in ports:
            while True:
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/livez", timeout=1)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.time() > deadline:
                    raise RuntimeError(f"replica on {port} did not start")
                await asyncio.sleep(0.2)


async def watch(client: aioredis.Redis, teams: TeamsLike, group_by: str, entries: int, pushed: float,
                observe_s: float) -> None:
    """Until every card of an ungrouped run arrived (or, grouped, the observation ends)."""
    while time.time() - pushed < observe_s:
        if group_by == "none" and len(teams.accepted) >= entries:
            return
        await asyncio.sleep(0.1)


async def main(args: argparse.Namespace) -> None:
    modes = {"both": ["fingerprint", "none"], "grouped": ["fingerprint"], "ungrouped": ["none"]}[args.mode]
    for group_by in modes:
        observe = args.observe if group_by == "none" else args.grouped_observe
        result = await one_run(group_by, args.entries, observe)
        print(json.dumps(result))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--observe", type=float, default=330.0, help="ungrouped: seconds to wait for every card")
    parser.add_argument("--grouped-observe", type=float, default=90.0, help="grouped: seconds to watch")
    parser.add_argument("--mode", choices=["both", "grouped", "ungrouped"], default="both")
    asyncio.run(main(parser.parse_args()))
