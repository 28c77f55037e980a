"""A brief gateway 429 (Retry-After: 1) during a storm: model calls vs fallbacks.

A local gateway answers 429 with `Retry-After: 1` to every call in its first
second, then valid replies. Two storms go through the real summarizer (real
Redis, real HTTP):

- same cause: 6 entries of one fingerprint at once (issue 10, defect 2);
- mixed: 72 entries of 12 causes, arriving over 3 s.

It prints the gateway's answers (429s, successful model calls) and the
summaries by source / fallback reason.

    python -m bench.bench_brief_429   # a private redis-server, or DLQ_BRIDGE_BENCH_REDIS_URL (flushed)
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_redis_url, bench_settings
from bridge.clients.http import build_http_client
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.intake.chain import normalize
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from tests.support.http_server import serve

REPLY = json.dumps({"title": "orders: job failed (model)", "severity": "error",
                    "likely_cause": "The dependency timed out.", "next_steps": ["Check it"],
                    "runbook_hint": ""})


class BusyGateway:
    """429 + Retry-After: 1 during the first second after its first call, then valid replies."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.answers: Counter[int] = Counter()
        self.app = FastAPI()
        self.app.add_api_route("/v1/chat/completions", self.chat, methods=["POST"])

    async def chat(self, _request: Request) -> JSONResponse:
        now = time.monotonic()
        self.first = self.first or now
        if now - self.first < 1.0:
            self.answers[429] += 1
            return JSONResponse({"error": "busy"}, status_code=429, headers={"Retry-After": "1"})
        self.answers[200] += 1
        await asyncio.sleep(0.05)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": REPLY}}]})


def entry(cause: int, job: int) -> bytes:
    return json.dumps({"queue": "orders", "job_id": f"c{cause}-j{job}", "job_name": f"task_{cause}",
                       "attempts": 3, "last_error": f"TimeoutError: dependency {cause} timed out"}).encode()


async def storm(redis_url: str, name: str, causes: int, per_cause: int, spread_s: float) -> None:
    gateway = BusyGateway()
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    async with serve(gateway.app) as url:
        settings = bench_settings(redis_url, f'[openclaw]\nurl = "{url}"\ntoken_env = ""\n')
        http = build_http_client(settings.http)
        summarizer = build_summarizer(settings, RunbookCatalog.load(), client, http, Metrics(), Health())
        entries = [entry(c, j) for j in range(per_cause) for c in range(causes)]

        async def one(i: int, raw: bytes) -> Any:
            await asyncio.sleep(spread_s * i / len(entries))
            return await summarizer.summarize(normalize(raw, "dead_letter:orders"))

        started = time.monotonic()
        summaries = await asyncio.gather(*(one(i, raw) for i, raw in enumerate(entries)))
        elapsed = time.monotonic() - started
        await http.aclose()
    await client.aclose()
    kinds = Counter(s.source.value if s.fallback_reason is None else f"fallback:{s.fallback_reason}"
                    for s in summaries)
    print(f"{name}: {len(entries)} entries, {causes} cause(s): gateway 429s={gateway.answers[429]} "
          f"model calls={gateway.answers[200]} fallbacks={sum(v for k, v in kinds.items() if 'fallback' in k)} "
          f"summaries={dict(kinds)} in {elapsed:.1f}s")


async def main() -> None:
    url, server = bench_redis_url()
    try:
        await storm(url, "same cause", causes=1, per_cause=6, spread_s=0.0)
        await storm(url, "mixed", causes=12, per_cause=6, spread_s=3.0)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
