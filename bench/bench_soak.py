"""Soak: one bridge for a long time at a steady rate, with a failure that never stops and new ones.

Starts its own redis-server and a loopback receiver, runs the real `dlq-bridge run` with Slack
(grouped per failure), PagerDuty (grouped per cause), a signed webhook for every job, a Slack sink
that always answers 503, and small caps; pushes `--rate` dead letters a second over `--queues`
DLQs. Of them, `--recurring` share is one failure that lasts the whole run (one cause, one
failure per queue); the rest come from causes that appear every `--new-cause-s` and recur for
`--cause-life-s`. Every `--sample-s` it samples the bridge's RSS, open fds, threads and /metrics
series, and Redis used_memory; every `--census-s` a census of every key pattern (keys, items,
keys without a TTL). At the end it prints the census at the first and last sample per pattern,
flags every pattern that still grew over the run's second half with keys that have no TTL, and
compares the memory model (`bridge.stores.footprint`) with what the bridge's keys hold.

  python bench/bench_soak.py --minutes 30 --rate 25          # docs/benchmarks.md, "Soak"
  python bench/bench_soak.py --minutes 3 --rate 25           # a quick look
  python bench/bench_soak.py --bridge-path /path/to/other/checkout --group-members-max 0 ...
                                      # the same load on a release before group_members_max (0: not set)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import redis

from bench.bench_redis_memory import Receiver, _free_port
from bridge.clients.embedded import EmbeddedRedis
from bridge.stores import footprint

ROOT = Path(__file__).resolve().parents[1]
GROWTH = 1.10  # a pattern of the bridge's whose items in keys without a TTL grew more than this
GROWTH_MIN = 50  # (and by at least this many) over the run's second half "grows"

# Key name → pattern: the parts that vary per job, entry, cause or word become `*`.
PATTERNS = [
    (r"^(dlq_bridge:entries:\{[^}]*\}:by:[a-z]+):.*$", r"\1:*"),
    (r"^(dlq_bridge:group:\{[^}]*\}:(?:prev-)?[a-z]+):(fp|cause|queue|job):.*$", r"\1:\2:*"),
    (r"^(dlq_bridge:delivered:\{[^}]*\}):.*$", r"\1:*"),
    (r"^(dlq_bridge:stats:\{[^}]*\}):\d+$", r"\1:*"),
    (r"^(dlq_bridge:summary(?:-lead)?):\{.*$", r"\1:{*}"),
    (r"^(dlq_bridge:limit):\{.*$", r"\1:{*}"),
    (r"^(dlq_bridge:claims:\{[^}]*\}):.*$", r"\1:*"),
]
QUEUE_TAG = re.compile(r"dead_letter:q\d+")


def pattern_of(key: str) -> str:
    for regex, repl in PATTERNS:
        if re.match(regex, key):
            key = re.sub(regex, repl, key)
            break
    return QUEUE_TAG.sub("dead_letter:q*", key)


@dataclass
class Census:
    at: float
    keys: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    items: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    no_ttl: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    items_no_ttl: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # in keys without a TTL
    biggest: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # items of its largest key


def census(client: redis.Redis, at: float) -> Census:
    found = Census(at)
    batch: list[bytes] = []
    for key in client.scan_iter(count=2000):
        batch.append(key)
        if len(batch) >= 2000:
            _count(client, batch, found)
            batch = []
    if batch:
        _count(client, batch, found)
    return found


def _count(client: redis.Redis, batch: list[bytes], found: Census) -> None:
    pipe = client.pipeline(transaction=False)
    for key in batch:
        pipe.type(key)
        pipe.ttl(key)
    replies = pipe.execute()
    sizes = client.pipeline(transaction=False)
    lengths = {b"list": sizes.llen, b"hash": sizes.hlen, b"zset": sizes.zcard, b"set": sizes.scard}
    counted = []
    for i, key in enumerate(batch):
        kind, ttl = replies[2 * i], replies[2 * i + 1]
        name = pattern_of(key.decode("utf-8", errors="replace"))
        found.keys[name] += 1
        found.no_ttl[name] += int(ttl == -1)
        if kind in lengths:
            lengths[kind](key)
        counted.append((name, ttl == -1, kind in lengths))
    lengths_found = iter(sizes.execute())
    for name, forever, sized in counted:
        n = int(next(lengths_found)) if sized else 1
        found.items[name] += n
        found.items_no_ttl[name] += n if forever else 0
        found.biggest[name] = max(found.biggest[name], n)


@dataclass
class Sample:
    at: float
    rss_mb: float
    fds: int
    threads: int
    series: int
    used_mb: float


def sample(pid: int, port: int, client: redis.Redis, at: float) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        series = sum(1 for line in reply.read().decode().splitlines() if line and not line.startswith("#"))
    used = int(client.info("memory")["used_memory"]) / 1e6
    return Sample(at, rss, fds, threads, series, used)


class Producer:
    """Pushes `rate` dead letters a second: the recurring failure, and causes that come and go."""

    RECURRING = ("PG::ConnectionBad: could not connect to server: Connection refused "
                 'Is the server running on host "postgres-primary" and accepting TCP/IP connections?')

    def __init__(self, client: redis.Redis, args: argparse.Namespace) -> None:
        self._client, self._args = client, args
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.pushed = 0
        self.causes = 0
        self._rng = random.Random(39)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _error(self, now: float, started: float) -> str:
        if self._rng.random() < self._args.recurring:
            return self.RECURRING
        born = int((now - started) // self._args.new_cause_s)
        alive = max(1, int(self._args.cause_life_s // self._args.new_cause_s))
        self.causes = max(self.causes, born + 1)
        cause = born - self._rng.randrange(min(alive, born + 1))
        word = "".join(chr(97 + (cause // 26 ** i) % 26) for i in range(4))
        return f"KeyError: missing field {word}{'x' * (cause % 7)} in {word}_service response"

    def _run(self) -> None:
        started, tick = time.monotonic(), 0.2
        per_tick = self._args.rate * tick
        owed = 0.0
        while not self._stop.is_set():
            owed += per_tick
            now = time.monotonic()
            pipe = self._client.pipeline(transaction=False)
            while owed >= 1:
                owed -= 1
                self.pushed += 1
                queue = f"q{self._rng.randrange(self._args.queues):02d}"
                entry = {"job_id": f"job-{self.pushed}", "job_name": f"{queue}_worker", "queue": queue,
                         "attempts": 3, "last_error": self._error(now, started), "args": [self.pushed],
                         "payload": "x" * self._args.payload_bytes}
                pipe.lpush(f"dead_letter:{queue}", json.dumps(entry))
            pipe.execute()
            self._stop.wait(max(0.0, tick - (time.monotonic() - now)))


def config(args: argparse.Namespace, redis_url: str, port: int, receiver: str) -> str:
    text = _config(args, redis_url, port, receiver)
    return text if args.group_members_max else text.replace("group_members_max = 0\n", "")


def _config(args: argparse.Namespace, redis_url: str, port: int, receiver: str) -> str:
    return f"""[server]
port = {port}
[redis]
url = "{redis_url}"
consumer_id = "soak"
[sources]
archive_max = {args.archive_max}
[delivery]
deadline_s = 30
max_attempts = 3
base_delay_s = 0.5
max_delay_s = 5
undeliverable_max = {args.undeliverable_max}
[console]
enabled = true
[[sinks]]
name = "console"
type = "console"
min_severity = "critical"
[[sinks]]
name = "slack-ops"
type = "slack"
url = "{receiver}/slack"
group_by = "fingerprint"
group_interval_s = 30
repeat_interval_s = {args.repeat_interval_s}
group_members_max = {args.group_members_max}
messages_per_second = 50
[[sinks]]
name = "slack-down"
type = "slack"
url = "{receiver}/down"
group_by = "cause"
group_interval_s = 30
repeat_interval_s = {args.repeat_interval_s}
group_members_max = {args.group_members_max}
[[sinks]]
name = "pagerduty"
type = "pagerduty"
events_url = "{receiver}/pd"
routing_key = "soak-routing-key-0123456789abcdef"
group_by = "cause"
group_interval_s = 30
repeat_interval_s = {args.repeat_interval_s}
group_members_max = {args.group_members_max}
[[sinks]]
name = "incidents-api"
type = "webhook"
url = "{receiver}/hook"
secret = "soak-secret"
"""


def report(args: argparse.Namespace, samples: list[Sample], counts: list[Census], pushed: int, causes: int,
           client: redis.Redis, handed_off: int, elapsed: float) -> None:
    first, last = samples[0], samples[-1]
    hours = max((last.at - first.at) / 3600, 1e-9)
    print(f"\nsoak: {elapsed / 60:.1f} min at {args.rate}/s over {args.queues} queues; {pushed:,} dead letters pushed, "
          f"{handed_off:,} handed off, {sum(int(client.llen(f'dead_letter:q{q:02d}')) for q in range(args.queues)):,}"
          f" still in their DLQs; {causes:,} causes")
    print(f"{'t (s)':>6} {'RSS MB':>7} {'fds':>5} {'thr':>4} {'series':>7} {'redis MB':>9}")
    for s in [*samples[:: max(1, len(samples) // 12)], last]:
        print(f"{s.at - first.at:>6.0f} {s.rss_mb:>7.1f} {s.fds:>5} {s.threads:>4} {s.series:>7} {s.used_mb:>9.1f}")
    half = samples[len(samples) // 2]
    slope = (last.rss_mb - half.rss_mb) / max((last.at - half.at) / 3600, 1e-9)
    print(f"RSS {first.rss_mb:.1f} → {half.rss_mb:.1f} → {last.rss_mb:.1f} MB ({slope:+.1f} MB/h over the second half; "
          f"{(last.rss_mb - first.rss_mb) / hours:+.1f} MB/h in all); "
          f"fds {first.fds} → {last.fds}; threads {first.threads} → {last.threads}; "
          f"/metrics series {first.series} → {last.series}")
    mid = min(counts, key=lambda c: abs(c.at - (counts[0].at + counts[-1].at) / 2))
    print(f"\nkey census: keys/items at t={counts[0].at - first.at:.0f} s, t={mid.at - first.at:.0f} s and "
          f"t={counts[-1].at - first.at:.0f} s; then, at the end, items in keys without a TTL and the largest key")
    flagged = []
    for name in sorted(set(counts[-1].keys) | set(mid.keys)):
        a, m, z = counts[0], mid, counts[-1]
        grows = (name.startswith("dlq_bridge:") and z.items_no_ttl[name] > GROWTH * m.items_no_ttl[name]
                 and z.items_no_ttl[name] - m.items_no_ttl[name] >= GROWTH_MIN)
        flagged += [name] if grows else []
        print(f"{'GROWS ' if grows else '      '}{name[:60]:<60} {a.keys[name]:>5}/{a.items[name]:<7} "
              f"{m.keys[name]:>5}/{m.items[name]:<7} {z.keys[name]:>5}/{z.items[name]:<7} "
              f"{z.items_no_ttl[name]:>7} {z.biggest[name]:>6}")
    print(f"\nthe bridge's patterns whose keys without a TTL grew by more than {GROWTH - 1:.0%} "
          f"(and {GROWTH_MIN} items) over the second half: {len(flagged)}"
          + (": " + ", ".join(flagged) if flagged else ""))
    model(args, client, elapsed, causes)


def model(args: argparse.Namespace, client: redis.Redis, elapsed: float, causes: int) -> None:
    """The memory model for this load and these settings, against the bridge's keys now."""
    measured = sum(int(client.memory_usage(k, samples=0) or 0) for k in client.scan_iter(match="dlq_bridge:*",
                                                                                             count=2000))
    days = elapsed / footprint.DAY_S
    load = footprint.Load(per_day=args.rate * footprint.DAY_S, sources=args.queues,
                          entry_bytes=200 + args.payload_bytes, causes_per_day=causes / max(days, 1e-9))
    kept = footprint.Retention(archive_max=args.archive_max, ledger_ttl_s=24 * 3600, ledger_sinks=1,
                               grouping_sinks=3, group_members_max=args.group_members_max,
                               repeat_interval_s=args.repeat_interval_s, summary_ttl_s=0,
                               undeliverable_max=args.undeliverable_max)
    parts = footprint.project(load, kept, days)
    print(f"\nmemory model for this run ({days * 24 * 60:.0f} min): "
          + "; ".join(f"{p.name} {footprint.mb(p.bytes)}" for p in parts))
    print(f"predicted {footprint.mb(footprint.total(parts))} + undeliverable up to "
          f"{footprint.mb(footprint.worst_case_extra(kept))}; measured (MEMORY USAGE of every dlq_bridge:* key) "
          f"{footprint.mb(measured)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=25.0, help="dead letters a second")
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--recurring", type=float, default=0.5, help="share of the failure that never stops")
    parser.add_argument("--new-cause-s", type=float, default=2.0)
    parser.add_argument("--cause-life-s", type=float, default=60.0)
    parser.add_argument("--payload-bytes", type=int, default=300)
    parser.add_argument("--sample-s", type=float, default=15.0)
    parser.add_argument("--census-s", type=float, default=60.0)
    parser.add_argument("--archive-max", type=int, default=1000)
    parser.add_argument("--undeliverable-max", type=int, default=200)
    parser.add_argument("--group-members-max", type=int, default=200)
    parser.add_argument("--repeat-interval-s", type=float, default=300.0)
    parser.add_argument("--bridge-path", default="", help="run the bridge of this checkout (default: this one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dlqb-soak-"))
    server = EmbeddedRedis(work / "redis", _free_port(), appendonly=False)
    server.start()
    client = redis.Redis.from_url(server.url)
    receiver = Receiver({"/down": (503, b"down")})
    port = _free_port()
    (work / "bridge.toml").write_text(config(args, server.url, port, receiver.url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLQ_BRIDGE_")}
    if args.bridge_path:
        env["PYTHONPATH"] = args.bridge_path
    env["DLQ_BRIDGE_CONSOLE_TOKEN"] = "soak-console-token-0123456789"
    log = (work / "bridge.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "--config", str(work / "bridge.toml"), "run"],
                            cwd=args.bridge_path or ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=log)
    producer = Producer(client, args)
    samples: list[Sample] = []
    counts: list[Census] = []
    started = time.monotonic()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                samples.append(sample(proc.pid, port, client, time.time()))
                break
            except OSError:
                time.sleep(0.5)
        if not samples:
            print(f"soak: the bridge did not serve /metrics; see {work / 'bridge.log'}", file=sys.stderr)
            return 1
        producer.start()
        counts.append(census(client, time.time()))
        end, next_census = started + args.minutes * 60, time.monotonic() + args.census_s
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(min(args.sample_s, max(0.0, end - time.monotonic())))
            samples.append(sample(proc.pid, port, client, time.time()))
            if time.monotonic() >= next_census:
                counts.append(census(client, time.time()))
                next_census += args.census_s
                print(f"t={time.monotonic() - started:.0f}s pushed={producer.pushed} rss={samples[-1].rss_mb:.1f}MB "
                      f"redis={samples[-1].used_mb:.1f}MB", flush=True)
        producer.stop()
        if proc.poll() is not None:
            print(f"soak: the bridge exited {proc.returncode}: {(work / 'bridge.log').read_text()[-2000:]}",
                  file=sys.stderr)
            return 1
        counts.append(census(client, time.time()))
        handed = sum(int(v) for k in client.scan_iter(match="dlq_bridge:stats:*") for f, v in client.hgetall(k).items()
                     if f == b"alerted")
        report(args, samples, counts, producer.pushed, producer.causes, client, handed, time.monotonic() - started)
    finally:
        producer.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        receiver.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
