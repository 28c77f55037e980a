"""A burst of distinct failures at once, in front of a real CPU model, with the shipped `[openclaw]` defaults.

Issue 22 measured, with the old defaults (`timeout_s` 30, `max_concurrency` 4, breaker 3 failures),
12 distinct failures pushed at once to the bridge in front of Qwen2.5-Coder 1.5B: 1 `openclaw`
summary, 6 `timeout` fallbacks, then 4 `circuit_open`. This bench repeats that with whatever
`bridge.config.sections.OpenClawSettings` ships now (only the URL and token are set; the summary
cache is off so every failure is one call), against a cold model server, and prints each summary's
source, its latency from submission, and the totals.

    scripts/install-model && python bench/bench_model_burst.py [--entries 12] [--model qwen15] [--favour -15]
    python bench/bench_model_burst.py --old-defaults     # timeout_s 30, max_concurrency 4, as issue 22 measured

No Redis is needed: the gateway gate decides in process.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_quality import CORPUS, TOKEN, dead_letter, favour, load_corpus
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.settings import Settings
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from tests.support.model_server import find_model, start_model_server

OLD_DEFAULTS = {"timeout_s": 30, "max_concurrency": 4, "breaker_failures": 3, "breaker_cooldown_s": 60}


def settings_for(url: str, old_defaults: bool) -> Settings:
    openclaw: dict[str, Any] = {"url": url, "token": TOKEN, "cache_ttl_s": 0}
    if old_defaults:
        openclaw.update(OLD_DEFAULTS)
    return Settings(redis={"url": "redis://127.0.0.1:1/0", "consumer_id": "bench"}, openclaw=openclaw,
                    sinks=[{"name": "console", "type": "console"}])


async def burst(url: str, entries: list[dict[str, Any]], old_defaults: bool) -> list[tuple[str, str, float]]:
    """Every entry submitted at once; (id, source or fallback reason, seconds from submission)."""
    settings = settings_for(url, old_defaults)
    cfg = settings.openclaw
    assert cfg is not None
    print(f"openclaw: timeout_s {cfg.timeout_s:g}, max_concurrency {cfg.max_concurrency}, breaker "
          f"{cfg.breaker_failures} failures / {cfg.breaker_cooldown_s:g} s", flush=True)
    async with httpx.AsyncClient(trust_env=False) as http:
        summarizer = build_summarizer(settings, RunbookCatalog.load(None), aioredis.Redis(port=1), http,
                                      Metrics(), Health())
        started = time.perf_counter()

        async def one(entry: dict[str, Any]) -> tuple[str, str, float]:
            summary = await summarizer.summarize(dead_letter(entry))
            took = time.perf_counter() - started
            outcome = summary.source.value if summary.source.value != "fallback" else summary.fallback_reason
            print(f"  {entry['id']}: {outcome} after {took:.1f} s", flush=True)
            return entry["id"], str(outcome), took

        results = await asyncio.gather(*(one(e) for e in entries))
        await summarizer.aclose()
    return list(results)


async def main(args: argparse.Namespace) -> None:
    missing = find_model(args.model)
    if missing:
        raise SystemExit(f"bench_model_burst: {missing}")
    entries = load_corpus(args.entries, 48 // args.entries or 1, CORPUS)  # spread over the corpus: distinct causes
    workdir = Path(tempfile.mkdtemp(prefix="dlq-bench-burst-"))
    server = start_model_server(workdir / args.model, args.model, threads=args.threads)
    favour(server.process.pid, args.favour)
    try:
        results = await burst(server.url, entries, args.old_defaults)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    outcomes = Counter(outcome for _, outcome, _ in results)
    seconds = [took for _, _, took in results]
    print(f"\n{len(results)} distinct failures at once, {args.model}, "
          f"{'old' if args.old_defaults else 'shipped'} defaults: "
          + ", ".join(f"{n} {outcome}" for outcome, n in outcomes.most_common())
          + f"; from submission: first {min(seconds):.1f} s, median {statistics.median(seconds):.1f} s, "
          f"last {max(seconds):.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=12)
    parser.add_argument("--model", default="qwen15", choices=["qwen15", "qwen05"])
    parser.add_argument("--threads", type=int, default=None, help="model server CPU threads (default 2)")
    parser.add_argument("--favour", type=int, default=0, metavar="NICE",
                        help="autogroup nice of the model server, e.g. -15 on a busy machine (root)")
    parser.add_argument("--old-defaults", action="store_true", help="timeout_s 30, max_concurrency 4 (before)")
    asyncio.run(main(parser.parse_args()))
