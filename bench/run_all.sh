#!/usr/bin/env sh
# Run the issue-5 benchmarks and the issue-11 storm in turn (about 10 minutes: the storm watches 5 minutes); figures go to stdout.
# Uses Redis db 13 of the local server (FLUSHED) unless DLQ_BRIDGE_BENCH_REDIS_URL is set.
set -eu
cd "$(dirname "$0")/.."
echo "machine: $(nproc) cores, $(free -h | awk '/^Mem:/ {print $2}') RAM, $(python -V 2>&1), load $(cut -d' ' -f1-3 /proc/loadavg)"
for bench in bench_throughput bench_latency bench_memory bench_storm bench_concurrency bench_cluster; do
    echo "== python -m bench.$bench"
    python -m "bench.$bench"
done
