"""A storm: many entries of ONE failure through the gateway path.

10,000 dead letters share queue, job name and error (distinct job ids, so
distinct alerts and idempotency keys): one fingerprint. Coalescing and the
summary cache should cost at most a couple of gateway calls. Every entry is
still delivered (signed webhook POST to the receiver). Peers in their own
process (`bench/peers.py`); the bridge in process, on uvloop.

    python -m bench.bench_storm [--entries 10000] [--gateway-latency 0.5]
"""

from __future__ import annotations

import argparse
import json

from bench.common import bench_redis_url, bench_settings, drain, peers_toml, push_entries, run
from bench.peers import PeersProcess

BENCH_DB = 13
QUEUE = "storm"


def storm_entry(i: int) -> bytes:
    return json.dumps({
        "queue": QUEUE, "job_id": f"storm-{i}", "job_name": "charge_card", "attempts": 5,
        "last_error": f"ConnectionRefusedError: payments-api:8443 refused connection (request {i})",
        "payload_excerpt": json.dumps({"order": i}),
    }).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--gateway-latency", type=float, default=0.5, help="seconds per gateway call")
    parser.add_argument("--concurrency", type=int, default=64, help="sources.concurrency")
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    try:
        with PeersProcess(gateway_latency_s=args.gateway_latency) as peers:
            push_entries(url, f"dead_letter:{QUEUE}", (storm_entry(i) for i in range(args.entries)))
            settings = bench_settings(url, peers_toml(peers.url), concurrency=args.concurrency)
            seconds = run(drain(settings))
            stats = peers.wait_posts(args.entries, 10)
        push_entries(url, "dead_letter:none", [])  # flush
    finally:
        if server:
            server.stop()
    calls, sources = stats["gateway_calls"], stats["summary_sources"]
    print(f"storm: {args.entries:,} entries of one fingerprint, gateway latency {args.gateway_latency * 1000:.0f} ms, "
          f"sources.concurrency {args.concurrency}, signed webhook sink")
    print(f"  gateway calls {calls} (target <= 2: {'met' if calls <= 2 else 'MISSED'}); drained in {seconds:.2f} s "
          f"= {args.entries / seconds:,.0f} entries/s; webhook posts {stats['webhook_posts']:,} "
          f"(summaries: openclaw {sources['openclaw']}, cache {sources['cache']:,}, fallback {sources['fallback']})")


if __name__ == "__main__":
    main()
