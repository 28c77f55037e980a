"""Console search on a large archive: 100 sources, 200,000 archived entries (docs/design.md, "Console search").

Seeds a private Redis with the entry records and record index the hand-off writes (100 list
sources x 2,000 entries; 20 error classes, 2,000 causes, 50 job names, 10 % fallback summaries;
one word in 5 % of the errors, another in 0.1 %), builds the search index once (timed, with its
memory and Redis commands per entry), then times one filtered page (25 entries, newest first,
with delivery states) per filter through the real `/api/v1/search` route (FastAPI in-process,
Redis over loopback): median and p95 of N runs.

    python -m bench.bench_console_search [--sources 100] [--per-source 2000] [--runs 40]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from fastapi import FastAPI

from bench.common import bench_redis_url
from bridge.config.console_auth import ConsoleAuthSettings
from bridge.console.api import Console, build_api
from bridge.console.auth import Authenticator
from bridge.console.service import ConsoleService
from bridge.core.models import Alert, DeadLetter, Severity, Summary, SummarySource
from bridge.settings import load_settings
from bridge.stores import keys
from bridge.stores.handoff import entry_record

TARGET_MS = 300.0
CLASSES = [f"Err{i}Error" for i in range(20)]
NOW_MS = int(time.time() * 1000)


def alert_json(s: int, i: int) -> tuple[str, str]:
    n = s * 100_000 + i
    word = " glacier" if n % 20 == 0 else ""
    word += " zanzibar" if n % 1000 == 7 else ""
    error = f"{CLASSES[n % 20]}: step {n % 2000} failed{word} on worker {n}"
    dl = DeadLetter(source_key=f"dead_letter:q-{s}", queue=f"q-{s}", job_id=f"j{n}", job_name=f"task_{n % 50}",
                    attempts=3, last_error=error, payload_excerpt=f'{{"order": {n}}}', raw_digest=f"{n:016x}",
                    fingerprint=f"fp{n % 2000:04d}")
    source = SummarySource.FALLBACK if n % 10 == 0 else SummarySource.OPENCLAW
    summary = Summary(title=f"Step {n % 2000} failed", severity=Severity.ERROR, likely_cause="upstream",
                      next_steps=["check it"], runbook_hint="retry", source=source)
    return dl.raw_digest, Alert(dead_letter=dl, summary=summary, severity=Severity.ERROR).model_dump_json()


async def seed(client: aioredis.Redis, sources: int, per_source: int) -> None:
    await client.flushdb()
    for s in range(sources):
        source = f"dead_letter:q-{s}"
        async with client.pipeline(transaction=False) as pipe:
            for i in range(per_source):
                digest, alert = alert_json(s, i)
                ms = NOW_MS - (per_source - i) * 1000 - s  # one entry a second per source
                pipe.hset(keys.entry_records(source), digest, entry_record(alert, ms, f"it{digest}", ["hook"], {},
                                                                             False))
                pipe.zadd(keys.entry_index(source), {digest: ms})
            await pipe.execute()


def console_app(service: ConsoleService) -> FastAPI:
    app = FastAPI()
    app.state.console = Console(service, None)  # type: ignore[arg-type]  # reads only
    app.state.console_auth = Authenticator(None, ConsoleAuthSettings())
    app.include_router(build_api())
    return app


async def timed(http: httpx.AsyncClient, params: dict[str, Any], runs: int) -> tuple[float, float, dict[str, Any]]:
    reply = await http.get("/api/v1/search", params=params)
    reply.raise_for_status()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        reply = await http.get("/api/v1/search", params=params)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], reply.json()


async def commands(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values() if isinstance(v, dict))


async def main_async(args: argparse.Namespace) -> None:
    url, server = bench_redis_url()
    client = aioredis.Redis.from_url(url)
    try:
        started = time.perf_counter()
        await seed(client, args.sources, args.per_source)
        total = args.sources * args.per_source
        print(f"seeded {total} entry records in {time.perf_counter() - started:.1f} s")
        cfg = Path(tempfile.mkdtemp(prefix="dlqb-search-")) / "bridge.toml"
        cfg.write_text(f'[redis]\nurl = "{url}"\n[[sinks]]\nname = "hook"\ntype = "webhook"\n'
                       'url = "http://127.0.0.1:9/x"\nsecret = "s"\n')
        settings = load_settings(cfg, {})
        names = [f"dead_letter:q-{s}" for s in range(args.sources)]
        service = ConsoleService(settings, client, list_sources=lambda: names)
        memory = int((await client.info("memory"))["used_memory"])
        calls = await commands(client)
        started = time.perf_counter()
        indexed = await service.search_index.refresh(names)
        took = time.perf_counter() - started
        extra = int((await client.info("memory"))["used_memory"]) - memory
        per_call = (await commands(client) - calls) / max(indexed, 1)
        print(f"index: {indexed} entries in {took:.1f} s ({indexed / took:,.0f}/s), "
              f"{extra / max(indexed, 1):.0f} bytes and {per_call:.1f} Redis commands per entry")
        rng = random.Random(7)
        queries: list[tuple[str, dict[str, Any]]] = [
            ("no filter", {}),
            ("error class (1 in 20)", {"error": rng.choice(CLASSES)}),
            ("fingerprint (1 in 2000)", {"fp": "fp0421"}),
            ("job name (1 in 50)", {"job": "task_7"}),
            ("queue glob (11 queues)", {"queue": "q-1*"}),
            ("source glob (11 sources)", {"source": "dead_letter:q-2*"}),
            ("summary = fallback", {"summary": "fallback"}),
            ("text, 5 % of errors", {"text": "glacier"}),
            ("text, 0.1 % of errors", {"text": "zanzibar"}),
            ("error class + text", {"error": CLASSES[0], "text": "glacier"}),
            ("delivery state", {"state": "unknown"}),
            ("delivery state, none match", {"state": "undeliverable"}),
            ("last 10 minutes", {"since": NOW_MS / 1000 - 600}),
        ]
        print(f"\n{'filter':<28} {'median ms':>10} {'p95 ms':>8} {'shown':>6} {'checked':>8} complete")
        worst = 0.0
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=console_app(service)),
                                     base_url="http://console") as http:
            for label, params in queries:
                median, p95, page = await timed(http, {**params, "limit": 25}, args.runs)
                worst = max(worst, p95)
                print(f"{label:<28} {median:>10.1f} {p95:>8.1f} {len(page['entries']):>6} {page['scanned']:>8} "
                      f"{page['complete']}")
        verdict = "under" if worst < TARGET_MS else "OVER"
        print(f"\nworst p95 {worst:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")
    finally:
        await client.aclose()
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, default=100)
    parser.add_argument("--per-source", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
