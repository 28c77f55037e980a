"""Throughput against `openclaw.max_concurrency` when every gateway call takes 2 s.

The ideal is max_concurrency / latency entries a second: the bridge keeps
that many calls in flight (sources.concurrency is 4x larger, so the pipeline
is never the limit). Each run drains 3 x max_concurrency distinct failures
(every entry costs one call). Peers in their own process; the bridge in
process, on uvloop. The wall time counts from pipeline start to empty DLQs.

    python -m bench.bench_concurrency [--latency 2.0] [--levels 2,4,8,16] [--rounds 3]
"""

from __future__ import annotations

import argparse

from bench.common import bench_redis_url, bench_settings, distinct_entry, drain, peers_toml, push_entries, run
from bench.peers import PeersProcess

BENCH_DB = 13


def one_level(url: str, peers: PeersProcess, level: int, rounds: int) -> dict[str, float]:
    queue = f"conc-{level}"
    n = push_entries(url, f"dead_letter:{queue}", (distinct_entry(i, queue) for i in range(rounds * level)))
    peers.reset()
    settings = bench_settings(url, peers_toml(peers.url, max_concurrency=level), concurrency=4 * level)
    seconds = run(drain(settings))
    stats = peers.stats()
    return {"n": n, "seconds": seconds, "calls": stats["gateway_calls"], "peak": stats["gateway_peak_in_flight"],
            "openclaw": stats["summary_sources"]["openclaw"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per gateway call")
    parser.add_argument("--levels", default="2,4,8,16", help="max_concurrency values")
    parser.add_argument("--rounds", type=int, default=3, help="entries per run = rounds x max_concurrency")
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    rows = []
    try:
        with PeersProcess(gateway_latency_s=args.latency) as peers:
            for level in (int(x) for x in args.levels.split(",")):
                rows.append((level, one_level(url, peers, level, args.rounds)))
        push_entries(url, "dead_letter:none", [])  # flush
    finally:
        if server:
            server.stop()
    print(f"concurrency: gateway latency {args.latency:g} s, {args.rounds} x max_concurrency distinct entries per run")
    for level, r in rows:
        rate, ideal = r["n"] / r["seconds"], level / args.latency
        verdict = "met" if rate >= 0.8 * ideal else "MISSED"
        print(f"  max_concurrency {level:>3}: {r['n']:>3} entries in {r['seconds']:5.2f} s = {rate:5.2f} entries/s, "
              f"ideal {ideal:5.2f}/s -> {rate / ideal:4.0%} (target >= 80%: {verdict}); "
              f"peak {r['peak']} calls in flight, {r['calls']} calls, {r['openclaw']} OpenClaw summaries")


if __name__ == "__main__":
    main()
