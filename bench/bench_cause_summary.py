"""Gateway calls for one outage: summaries per cause against per fingerprint, in the same run.

One dependency down under 12 queues (the same connection error, ids and numbers varying, a job
name per queue) plus one unrelated failure per queue, all submitted at once to the bridge's own
summarizer, in front of a local gateway process boundary (tests.support.fake_gateway on loopback)
that answers after `--latency` seconds and serves one call at a time, as a CPU model does. Real
Redis (a private server) holds the cache and the fleet lead. For `openclaw.summary_per_cause`
on and off it prints the gateway calls, the seconds until every summary is made, and how the
summaries split between `openclaw`, `cache` and `fallback`.

    python -m bench.bench_cause_summary [--per-queue 50] [--latency 2.0]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from fastapi import Request, Response

from bench.bench_cause_grouping import OTHER, OUTAGE, QUEUES
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import DeadLetter
from bridge.intake.chain import normalize
from bridge.settings import load_settings
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve
from tests.support.redis_server import start_private_redis


def letters(per_queue: int) -> list[DeadLetter]:
    out = []
    for q, queue in enumerate(QUEUES):
        for i in range(per_queue):
            error = OTHER.format(i=q) if i == 0 else OUTAGE.format(ip=i % 250, i=i, ms=i * 7)
            entry = {"job_id": f"{queue}-{i}", "job_name": f"sync_{queue}", "attempts": 3, "last_error": error}
            out.append(normalize(json.dumps(entry).encode(), f"dead_letter:{queue}"))
    return out


class OneAtATime(FakeGateway):
    """A gateway in front of a model that serves one call at a time."""

    def __init__(self, latency_s: float) -> None:
        super().__init__()
        self._model = asyncio.Lock()
        self._latency = latency_s

    async def _chat(self, request: Request) -> Response:
        async with self._model:
            await asyncio.sleep(self._latency)
            return await super()._chat(request)


async def run(per_cause: bool, batch: list[DeadLetter], redis_url: str, latency_s: float) -> str:
    gateway = OneAtATime(latency_s)
    workdir = Path(tempfile.mkdtemp(prefix="dlqb-cause-summary-"))
    config = workdir / "bridge.toml"
    config.write_text(f'[redis]\nurl = "{redis_url}"\nconsumer_id = "bench"\n', encoding="utf-8")
    client = aioredis.from_url(redis_url)
    await client.flushdb()  # the bench's own private server
    async with serve(gateway.app()) as url, httpx.AsyncClient(trust_env=False) as http:
        openclaw = {"url": url, "token": "bench-token", "timeout_s": 600, "calls_per_minute": 0,
                    "summary_per_cause": per_cause}
        settings = load_settings(_with_openclaw(config, openclaw), {})
        summarizer = build_summarizer(settings, RunbookCatalog.load(), client, http, Metrics(), Health())
        started = time.perf_counter()
        found = await asyncio.gather(*(summarizer.summarize(dl) for dl in batch))
        took = time.perf_counter() - started
        await summarizer.aclose()
    await client.aclose()
    sources = collections.Counter(s.source.value for s in found)
    return (f"| {'on' if per_cause else 'off'} | {len(batch):,} | {gateway.calls} | {took:.1f} | "
            f"{sources['openclaw']} / {sources['cache']} / {sources['fallback']} |")


def _with_openclaw(config: Path, openclaw: dict[str, Any]) -> Path:
    lines = [config.read_text(encoding="utf-8"), "[openclaw]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in openclaw.items()]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


async def main(args: argparse.Namespace) -> None:
    batch = letters(args.per_queue)
    server = start_private_redis(appendonly=False)
    try:
        print(f"{len(QUEUES)} queues x {args.per_queue} dead letters (one unrelated failure per queue), "
              f"gateway {args.latency:.1f} s per call, one call at a time")
        print("\n| per cause | summaries | gateway calls | s until all made | openclaw / cache / fallback |")
        print("| --- | --- | --- | --- | --- |")
        for per_cause in (True, False):
            print(await run(per_cause, batch, server.url, args.latency), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-queue", type=int, default=50, help="dead letters per queue")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the gateway takes per call")
    asyncio.run(main(parser.parse_args()))
