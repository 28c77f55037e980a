"""Summaries per second through the REAL OpenClaw gateway (npm `openclaw`, Node 24).

Starts the gateway with the shipped hardened config (deploy/openclaw/openclaw.json5)
in front of a fake OpenAI-compatible model (instant, then with latency), and
runs the bridge's own summarizer (cache off, so every dead letter is one call)
at concurrency 1, 4 and 8. Prints the first call, the steady-state latency,
summaries/s per concurrency, and the gateway's session growth on disk.

    scripts/install-gateway && python bench/bench_openclaw.py [--entries 16] [--latency 0 1.0]

No Redis is needed (the summary cache is off).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import Summary
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from bridge.summarize.summarizer import Summarizer
from tests.conftest import envelope_entry
from tests.support.fake_model import FakeModel
from tests.support.http_server import ThreadedServer
from tests.support.openclaw_gateway import Gateway, chat_body, find_gateway, http_status, start_gateway

TOKEN = "bench-token"


def settings_for(gateway: Gateway, concurrency: int, timeout_s: float) -> Settings:
    return Settings(
        redis={"url": "redis://127.0.0.1:1/0", "consumer_id": "bench"},  # never contacted: no cache
        openclaw={"url": gateway.url, "token": TOKEN, "max_concurrency": concurrency,
                  "calls_per_minute": 0, "cache_ttl_s": 0, "timeout_s": timeout_s,
                  "breaker_failures": 1000},
        sinks=[{"name": "console", "type": "console"}],
    )


async def timed(summarizer: Summarizer, n: int, tag: str) -> tuple[float, list[float], list[Summary]]:
    """Wall time for n distinct dead letters, and each one's latency."""
    async def one(i: int) -> tuple[float, Summary]:
        raw = envelope_entry(job_id=f"{tag}-{i}", job_name=f"job_{tag}_{i}", last_error=f"error {tag} {i}")
        started = time.perf_counter()
        summary = await summarizer.summarize(normalize(raw, "dead_letter:bench"))
        return time.perf_counter() - started, summary

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, [r[0] for r in results], [r[1] for r in results]


async def run_level(gateway: Gateway, concurrency: int, n: int, tag: str, timeout_s: float) -> str:
    settings = settings_for(gateway, concurrency, timeout_s)
    async with httpx.AsyncClient(trust_env=False) as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(), aioredis.Redis(port=1), http,
                                      Metrics(), Health())
        wall, latencies, summaries = await timed(summarizer, n, tag)
    ok = sum(s.source == "openclaw" for s in summaries)
    reasons = sorted({s.fallback_reason or "" for s in summaries if s.source != "openclaw"})
    return (f"  concurrency {concurrency}: {n} summaries in {wall:5.1f} s = {n / wall:5.2f}/s; "
            f"latency p50 {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s; "
            f"openclaw {ok}/{n}" + (f", fallback {reasons}" if reasons else ""))


def steady_state(gateway: Gateway, calls: int = 8) -> list[float]:
    took = []
    for i in range(calls):
        started = time.perf_counter()
        assert http_status(gateway, "POST", "/v1/chat/completions", chat_body(f"steady {i}")) == 200
        took.append(time.perf_counter() - started)
    return took


def session_bytes(gateway: Gateway) -> int:
    return gateway.state_bytes("agents") + gateway.state_bytes("state")


async def main(args: argparse.Namespace) -> None:
    reason = find_gateway()
    if reason:
        raise SystemExit(f"bench_openclaw: {reason}")
    model = FakeModel()
    workdir = Path(tempfile.mkdtemp(prefix="dlq-bench-openclaw-"))
    with ThreadedServer(model.app()) as server:
        started = time.perf_counter()
        gateway = start_gateway(server.url, workdir, token=TOKEN)
        print(f"gateway ready in {time.perf_counter() - started:.1f} s (openclaw, Node 24, hardened config)")
        try:
            started = time.perf_counter()
            assert http_status(gateway, "POST", "/v1/chat/completions", chat_body("first"), timeout_s=300) == 200
            print(f"first call: {time.perf_counter() - started:.1f} s")
            took = steady_state(gateway)
            print(f"steady state, instant model, sequential: p50 {statistics.median(took):.2f} s, "
                  f"min {min(took):.2f} s, max {max(took):.2f} s")
            before, calls_before = session_bytes(gateway), model.calls
            for latency in args.latency:
                model.latency_s = latency
                print(f"model latency {latency:g} s:")
                for concurrency in (1, 4, 8):
                    print(await run_level(gateway, concurrency, args.entries, f"l{latency}c{concurrency}",
                                          args.timeout), flush=True)
            calls = model.calls - calls_before
            grown = session_bytes(gateway) - before
            print(f"session state: +{grown / 1e6:.1f} MB for {calls} calls = {grown / max(calls, 1) / 1e3:.0f} KB/call"
                  f" (agents/ + state/ now {session_bytes(gateway) / 1e6:.1f} MB;"
                  f" whole state dir {gateway.state_bytes() / 1e6:.1f} MB)")
        finally:
            gateway.stop()
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=16, help="dead letters per concurrency level")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 1.0], help="model latencies (s)")
    parser.add_argument("--timeout", type=float, default=60.0, help="openclaw.timeout_s for the bench")
    asyncio.run(main(parser.parse_args()))
