"""Bytes the bridge keeps in Redis per archived entry, group, ledger key and remembered kind job.

Starts its own redis-server on a free port, pushes dead letters into Redis lists and Sidekiq
jobs into a `dead` set, runs the real `dlq-bridge run` until every alert is delivered to the
console sink, then measures every `dlq_bridge:*` key with `MEMORY USAGE … SAMPLES 0` and prints
one row per key family: keys, items (list entries, hash fields, set members), bytes in all,
bytes per item, and what bounds the family. docs/design.md, section 6 quotes the figures.
Then it sets the memory model's bytes per item (bridge/stores/footprint.py) beside the measured
ones, the model's total for this run beside the measured one, and prints the planning table of
docs/operations.md ("Redis memory: planning"): Redis memory after a month by rate, DLQs and sinks.

  python bench/bench_redis_memory.py                  # 2,000 list entries, 500 Sidekiq jobs
  python bench/bench_redis_memory.py --entries 10000 --error-bytes 2048
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import redis

from bridge.clients.embedded import EmbeddedRedis
from bridge.stores import footprint

ROOT = Path(__file__).resolve().parents[1]

# (family, key pattern, what holds it) — first match wins.
FAMILIES = [
    ("archived entry", r"^dlq_bridge:alerted:", "sources.archive_max per DLQ (LTRIM)"),
    ("entry record", r"^dlq_bridge:entries:\{[^}]*\}$", "sources.archive_max per source, with the archive"),
    ("entry index", r"^dlq_bridge:entries:\{[^}]*\}:index$", "sources.archive_max per source, with the archive"),
    ("search index", r"^dlq_bridge:entries:\{[^}]*\}:(by:|facets|queues|indexed|jobs|acted)",
     "the records kept (sources.archive_max), trimmed every minute by the upkeep"),
    ("search registry", r"^dlq_bridge:search:indexed$", "one member per indexed source"),
    ("hand-off stats", r"^dlq_bridge:stats:", "one hash per source and minute, 2 h TTL"),
    ("ledger key", r"^dlq_bridge:delivered:", "delivery.ledger_ttl_s (24 h)"),
    ("group state", r"^dlq_bridge:group:\{[^}]*\}:state:", "closed after delivery.group window; one per cause"),
    ("group jobs", r"^dlq_bridge:group:\{[^}]*\}:(jobs|job):", "group_members_max named per group"),
    ("group facets", r"^dlq_bridge:group:\{[^}]*\}:(queues|facets|gone):", "per queue, job name, kind"),
    ("pacing", r"^dlq_bridge:limit:", "PX interval + 1 s"),
    ("group (previous)", r"^dlq_bridge:group:\{[^}]*\}:prev", "the cause's last closed group"),
    ("groups index", r"^dlq_bridge:groups:", "one per sink"),
    ("summary cache", r"^dlq_bridge:summary:", "openclaw.cache_ttl_s per fingerprint"),
    ("kind cursor", r"^dlq_bridge:cursor:\{[^}]*\}$", "one per watched source"),
    ("kind cursor ids", r"^dlq_bridge:cursor:\{[^}]*\}:ids$", "ids finished at the watermark's score only"),
    ("remembered kind job", r"^dlq_bridge:cursor:\{[^}]*\}:held",
     "until the job leaves the store (resolve); at most 20,000 per watched set"),
    ("kind leases", r"^dlq_bridge:cursor:\{[^}]*\}:lease", "while a job is being alerted"),
    ("sink queue", r"^dlq_bridge:sinkq:", "until delivered"),
    ("outbox", r"^dlq_bridge:outbox:", "until forwarded to the sink queues"),
    ("undeliverable", r"^dlq_bridge:undeliverable", "delivery.undeliverable_max"),
    ("quarantine", r"^dlq_bridge:quarantine:", "never trimmed: check warns, dlq_bridge_quarantine_depth"),
    ("heartbeat", r"^dlq_bridge:consumer:", "sources.heartbeat_ttl_s"),
]


def items(client: redis.Redis, key: bytes, kind: bytes) -> int:
    counters = {b"list": client.llen, b"hash": client.hlen, b"zset": client.zcard, b"set": client.scard,
                b"stream": client.xlen}
    counter = counters.get(kind)
    return int(counter(key)) if counter else 1


def measure(client: redis.Redis) -> list[tuple[str, int, int, int, str]]:
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for key in client.scan_iter(match="dlq_bridge:*", count=1000):
        name = key.decode()
        family, bound = next(((f, b) for f, p, b in FAMILIES if re.search(p, name)), ("other: " + name[:40], ""))
        row = found[f"{family}\x1f{bound}"]
        row[0] += 1
        row[1] += items(client, key, client.type(key))
        row[2] += int(client.memory_usage(key, samples=0) or 0)
    rows = []
    for label, (count, members, size) in sorted(found.items()):
        family, bound = label.split("\x1f")
        rows.append((family, count, members, size, bound))
    return rows


def dead_letter(i: int, error_bytes: int) -> bytes:
    error = f"TimeoutError: upstream {i % 50} timed out " + "x" * max(0, error_bytes - 40)
    return json.dumps({"job_id": f"job-{i}", "job_name": "send_email", "queue": "emails", "attempts": 3,
                       "last_error": error, "correlation_id": f"c-{i}"}).encode()


def sidekiq_job(i: int, error_bytes: int) -> str:
    return json.dumps({"jid": f"jid{i:08d}", "class": "HardWorker", "queue": "default", "args": [i],
                       "retry_count": 3, "error_class": "Net::ReadTimeout",
                       "error_message": "x" * error_bytes, "failed_at": 1.7e9 + i})


def wait_until(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def drained(client: redis.Redis, queues: int, jobs: int) -> bool:
    alerted = sum(int(client.llen(k)) for k in client.scan_iter(match="dlq_bridge:alerted:*"))
    queued = sum(int(client.hlen(k)) for k in client.scan_iter(match="dlq_bridge:sinkq:*:items"))
    outbox = sum(int(client.hlen(k)) for k in client.scan_iter(match="dlq_bridge:outbox:*"))
    return alerted >= queues + jobs and queued == 0 and outbox == 0


async def index_for_search(url: str, sources: list[str]) -> None:
    """Build the console's search index of what was handed off, as a first search does."""
    import redis.asyncio as aioredis

    from bridge.stores.search_index import SearchIndex

    client = aioredis.Redis.from_url(url)
    try:
        await SearchIndex(client).refresh(sources)
    finally:
        await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--error-bytes", type=int, default=512)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dlqb-bench-memory-"))
    server = EmbeddedRedis(work / "redis", _free_port(), appendonly=False)
    server.start()
    client = redis.Redis.from_url(server.url)
    try:
        client.lpush("dead_letter:emails", *[dead_letter(i, args.error_bytes) for i in range(args.entries)])
        client.zadd("dead", {sidekiq_job(i, args.error_bytes): 1.7e9 + i for i in range(args.jobs)})
        before = int(client.info("memory")["used_memory"])
        config = work / "bridge.toml"
        port = _free_port()
        receiver = Receiver()
        config.write_text(f'[server]\nport = {port}\n[redis]\nurl = "{server.url}"\nconsumer_id = "bench-memory"\n'
                          '[[sources.sidekiq]]\nname = "sidekiq"\n'
                          '[[sinks]]\nname = "console"\ntype = "console"\n'
                          f'[[sinks]]\nname = "hooks"\ntype = "webhook"\nurl = "{receiver.url}/hook"\n'
                          'secret = "bench-secret"\n'
                          f'[[sinks]]\nname = "slack"\ntype = "slack"\nurl = "{receiver.url}/slack"\n'
                          f'[[sinks]]\nname = "pd"\ntype = "pagerduty"\nevents_url = "{receiver.url}/pd"\n'
                          'routing_key = "bench-routing-key-0123456789abcdef"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLQ_BRIDGE_")}
        log = (work / "bridge.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "bridge", "--config", str(config), "run"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
        try:
            if not wait_until(lambda: proc.poll() is not None or drained(client, args.entries, args.jobs), 300):
                print(f"bench: the bridge did not finish in 300 s; see {work / 'bridge.log'}", file=sys.stderr)
                return 1
            if proc.poll() is not None:
                print(f"bench: the bridge exited {proc.returncode}: {(work / 'bridge.log').read_text()[-2000:]}",
                      file=sys.stderr)
                return 1
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            receiver.stop()
        asyncio.run(index_for_search(server.url, ["dead_letter:emails", "sidekiq"]))
        after = int(client.info("memory")["used_memory"])
        print(f"redis memory: {args.entries} list entries + {args.jobs} Sidekiq jobs, errors of {args.error_bytes} B,"
              " console, webhook, Slack and PagerDuty sinks (one local receiver);"
              f" used_memory {before / 1e6:.1f} MB before, {after / 1e6:.1f} MB after")
        print(f"{'family':<22} {'keys':>6} {'items':>7} {'bytes':>10} {'B/item':>7}  bound")
        rows = measure(client)
        for family, count, members, size, bound in rows:
            print(f"{family:<22} {count:>6} {members:>7} {size:>10} {size / max(members, 1):>7.0f}  {bound}")
        groups = [r for r in rows if r[0].startswith("group ")]
        opened = sum(r[1] for r in rows if r[0] == "group state")
        print(f"per group (state, jobs, queues, previous; {opened} groups): "
              f"{sum(r[3] for r in groups) / max(opened, 1):.0f} B")
        # Per job, not per item: a grouped job is a member of the jobs set and a field of the job
        # details hash; a remembered kind job a member of the held set and a field of its notes.
        sinks = sum(r[1] for r in rows if r[0] == "groups index")
        state = sum(r[3] for r in rows if r[0] == "group state")
        grouped = sum(r[3] for r in rows if r[0] == "group jobs")
        held = sum(r[3] for r in rows if r[0] == "remembered kind job")
        print(f"per group: {state / max(opened, 1):.0f} B of state; per job in a group: "
              f"{grouped / max(sinks * (args.entries + args.jobs), 1):.0f} B per grouping sink ({sinks} sinks)")
        print(f"per remembered kind job (held set member and its note): {held / max(args.jobs, 1):.0f} B")
        against_model(rows, args, sinks, opened)
        planning_table()
    finally:
        server.stop()
    return 0


def per_item(rows: list[tuple[str, int, int, int, str]], family: str, count: int) -> float:
    return sum(r[3] for r in rows if r[0] == family) / max(count, 1)


def against_model(rows: list[tuple[str, int, int, int, str]], args: argparse.Namespace, sinks: int,
                  groups: int) -> None:
    """The model's bytes per item beside this run's, and its total for this run beside the measured one."""
    entries = args.entries + args.jobs
    measured = {
        "entry record + index": (per_item(rows, "entry record", entries) + per_item(rows, "entry index", entries),
                                 footprint.ENTRY_RECORD_B),
        "search index per record": (per_item(rows, "search index", entries), footprint.SEARCH_INDEX_B),
        "ledger key": (per_item(rows, "ledger key", sum(r[1] for r in rows if r[0] == "ledger key")),
                       footprint.LEDGER_KEY_B),
        "group state": (per_item(rows, "group state", groups), footprint.GROUP_STATE_B),
        "job named by a group": (per_item(rows, "group jobs", sum(r[2] for r in rows if r[0] == "group jobs") / 2),
                                 footprint.GROUP_JOB_B),
    }
    print("\nmodel (bridge/stores/footprint.py) against this run, bytes per item:")
    for name, (seen, modelled) in measured.items():
        print(f"  {name:<26} measured {seen:>7.0f}   model {modelled:>6}")
    load = footprint.Load(per_day=entries, sources=2, entry_bytes=args.error_bytes + 128, causes_per_day=groups / 2)
    kept = footprint.Retention(ledger_sinks=1, grouping_sinks=sinks, summary_ttl_s=0)
    predicted = footprint.total(footprint.project(load, kept, 1.0))
    held = sum(r[3] for r in rows if r[0] == "remembered kind job")
    total = sum(r[3] for r in rows) - held  # the model leaves out the held jobs of resolving kinds
    print(f"  total for this run: model {predicted / 1e6:.1f} MB, measured {total / 1e6:.1f} MB "
          f"(every dlq_bridge:* key but the remembered kind jobs)")


def planning_table() -> None:
    """Redis memory after 30 days at a steady rate (the defaults; 50 new causes a day)."""
    readme = "Slack + PagerDuty grouped, a webhook per job"
    setups = [("console (the default sink)", footprint.Retention()),
              (readme, footprint.Retention(ledger_sinks=1, grouping_sinks=2, summary_ttl_s=3600))]
    print("\nplanning: Redis memory after 30 days (defaults: archive_max 10,000, ledger 24 h, "
          "group_members_max 200; 50 new causes a day; 640 B entries)")
    print(f"{'dead letters/s':>14} {'DLQs':>5}  {'sinks':<46} {'archives':>9} {'ledger':>8} {'groups':>8} {'total':>9}")
    for rate in (1, 10, 25):
        for dlqs in (5, 20):
            for name, kept in setups:
                parts = footprint.project(footprint.Load(per_day=rate * footprint.DAY_S, sources=dlqs), kept, 30)
                print(f"{rate:>14} {dlqs:>5}  {name:<46} {footprint.mb(parts[0].bytes):>9} "
                      f"{footprint.mb(parts[1].bytes):>8} {footprint.mb(parts[2].bytes):>8} "
                      f"{footprint.mb(footprint.total(parts)):>9}")


class Receiver:
    """One receiver on loopback for the webhook (204), Slack (200 ok) and PagerDuty (202) sinks;
    `extra`: more paths and their (status, body), e.g. a sink that is down."""

    def __init__(self, extra: dict[str, tuple[int, bytes]] | None = None) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, body = {"/slack": (200, b"ok"), "/pd": (202, b'{"status": "success"}'), **(extra or {})}.get(
                    self.path, (204, b""))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main())
