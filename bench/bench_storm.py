"""A storm through a fleet: 3,000 dead letters of 2 causes, 3 `dlq-bridge run` replicas, one killed -9.

The "Done when" run of issue 11 (docs/benchmarks.md, "Storm"). Everything is
real except the far ends, which are local fakes with real limits, served by
this process on loopback:

- Slack: one incoming webhook taking 1 message/s; a message less than 0.95 s
  after the previous accepted one (50 ms of arrival jitter forgiven) is
  answered 429 with `Retry-After: 1`;
- PagerDuty Events v2: 120 events per sliding minute, 429 beyond;
- a webhook (group_by none: every job, signed), answering 200 at once;
- the fake OpenClaw gateway (tests/support/fake_gateway.py), 800 ms a call.

Three replicas (`python -m bridge --config … run`, distinct consumer ids,
service defaults: group_wait 10 s, group_interval 60 s, heartbeat 30 s) share
a private Redis. 3,000 entries are LPUSHed in under a second to two DLQs,
one cause each; `--kill-after` seconds later one replica is killed -9 and not
restarted. A critical dead letter of a third cause is pushed `--critical-after`
seconds in. The run watches for `--observe` seconds (default 300, the issue's
five minutes), then prints each figure against its target.

    python -m bench.bench_storm [--entries 3000] [--observe 300] [--kill-after 3] [--critical-after 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.common import _free_port, bench_redis_url, read_body, service_config
from bridge.stores import keys
from tests.support.fake_gateway import FakeGateway
from tests.support.http_server import serve

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = 3
GROUP_WAIT_S = 10.0
SLACK_GAP_S = 0.95
PD_PER_MINUTE = 120
CAUSES = {
    "payments": ("charge_card", "ConnectionRefusedError: payments-api:8443 refused connection (request {i})"),
    "emails": ("send_receipt", "TimeoutError: smtp.internal:25 timed out after 30s (message {i})"),
}
CRITICAL_QUEUE = "ledger"
CRITICAL_JOB = "ledger-critical-1"


@dataclass
class Receivers:
    """Slack (1/s, 429 + Retry-After beyond), PagerDuty (120/min, 429 beyond), a webhook; raw ASGI."""

    started: float = field(default_factory=time.time)
    slack: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    slack_429: int = 0
    pagerduty: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    pagerduty_429: int = 0
    hook: list[tuple[float, str]] = field(default_factory=list)
    hook_keys: dict[str, set[str]] = field(default_factory=dict)
    _last_slack: float = -1e9

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if scope["path"].startswith("/hook"):
            key = dict(scope["headers"]).get(b"idempotency-key", b"").decode()
            self.hook_keys.setdefault(str(json.loads(body).get("job_id")), set()).add(key)
        status, headers = self.answer(scope["path"], body, time.time())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    def answer(self, path: str, body: bytes, now: float) -> tuple[int, list[tuple[bytes, bytes]]]:
        if path.startswith("/hook"):
            self.hook.append((now, str(json.loads(body).get("job_id"))))
            return 200, []
        if path.startswith("/slack"):
            if now - self._last_slack < SLACK_GAP_S:
                self.slack_429 += 1
                return 429, [(b"retry-after", b"1")]
            self._last_slack = now
            self.slack.append((now, json.loads(body)))
            return 200, []
        if path.startswith("/pagerduty"):
            if sum(1 for at, _ in self.pagerduty if now - at < 60) >= PD_PER_MINUTE:
                self.pagerduty_429 += 1
                return 429, []
            self.pagerduty.append((now, json.loads(body)))
            return 202, []
        return 404, []


def entry(queue: str, i: int) -> bytes:
    job_name, error = CAUSES[queue]
    return json.dumps({
        "queue": queue, "job_id": f"{queue}-{i}", "job_name": job_name, "attempts": 5,
        "last_error": error.format(i=i), "payload_excerpt": json.dumps({"n": i}),
    }).encode()


def critical_entry() -> bytes:
    return json.dumps({
        "queue": CRITICAL_QUEUE, "job_id": CRITICAL_JOB, "job_name": "post_ledger_batch", "attempts": 5,
        "last_error": "IntegrityError: duplicate key value violates unique constraint ledger_pkey",
    }).encode()


def sinks_toml(base: str, gateway: str) -> str:
    return (
        f'[openclaw]\nurl = "{gateway}"\ntoken = "bench-token"\n'
        f'[severity]\n"{CRITICAL_QUEUE}" = "critical"\n'
        f'[[sinks]]\nname = "slack"\ntype = "slack"\nurl = "{base}/slack/T000/B000/XXXX"\n'
        f'[[sinks]]\nname = "pagerduty"\ntype = "pagerduty"\nrouting_key = "bench-routing-key"\n'
        f'events_url = "{base}/pagerduty/v2/enqueue"\n'
        f'[[sinks]]\nname = "hook"\ntype = "webhook"\nurl = "{base}/hook/in"\nsecret = "bench-webhook-secret"\n'
    )


def start_replicas(redis_url: str, toml: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for n in range(REPLICAS):
        config = service_config(redis_url, _free_port(), f"storm-{n}", toml)
        log = (logs / f"replica-{n}.log").open("wb")
        procs.append(subprocess.Popen([sys.executable, "-m", "bridge", "--config", str(config), "run"],
                                      cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
    return procs


@dataclass
class Marks:
    pushed: float = 0.0
    archived: float | None = None
    webhook_all: float | None = None
    killed: float | None = None
    critical_pushed: float | None = None
    critical_claimed: float | None = None
    held_by_killed: int = 0
    rest_archived: float | None = None
    archive_counts: dict[str, int] = field(default_factory=dict)


async def watch(client: aioredis.Redis, rx: Receivers, marks: Marks, args: argparse.Namespace,
                procs: list[subprocess.Popen[bytes]]) -> None:
    per_queue = args.entries // len(CAUSES)
    critical_source = f"dead_letter:{CRITICAL_QUEUE}"
    end = marks.pushed + args.observe
    while time.time() < end:
        now = time.time()
        if marks.killed is None and now - marks.pushed >= args.kill_after:
            procs[0].send_signal(signal.SIGKILL)
            marks.killed = now
            marks.held_by_killed = sum([int(await client.llen(keys.processing(f"dead_letter:{q}", "storm-0")))
                                        for q in CAUSES])
        if marks.critical_pushed is None and now - marks.pushed >= args.critical_after:
            await client.lpush(critical_source, critical_entry())
            marks.critical_pushed = time.time()
        if marks.critical_pushed is not None and marks.critical_claimed is None and not await client.llen(
                critical_source):
            marks.critical_claimed = time.time()
        if marks.archived is None:
            counts = {q: int(await client.llen(keys.alerted(f"dead_letter:{q}"))) for q in CAUSES}
            if marks.killed and not marks.rest_archived and sum(counts.values()) >= per_queue * len(
                    CAUSES) - marks.held_by_killed:
                marks.rest_archived = now
            if all(c >= per_queue for c in counts.values()):
                marks.archived, marks.archive_counts = now, counts
        if marks.webhook_all is None and len({j for _, j in rx.hook}) >= args.entries + 1:
            marks.webhook_all = now
        await asyncio.sleep(0.01)


async def exactly_once(client: aioredis.Redis, per_queue: int) -> tuple[int, int, int]:
    """(archived, distinct, duplicates) over the two storm DLQs' archives."""
    got: list[bytes | str] = []
    for queue in CAUSES:
        got += await client.lrange(keys.alerted(f"dead_letter:{queue}"), 0, -1)
    counts = Counter(got)
    return len(got), len(counts), sum(c - 1 for c in counts.values() if c > 1)


async def storm(args: argparse.Namespace) -> None:
    redis_url, server = bench_redis_url(11)
    client = aioredis.Redis.from_url(redis_url)
    rx, gateway = Receivers(), FakeGateway(latency_s=args.gateway_latency)
    logs = Path(tempfile.mkdtemp(prefix="dlqb-storm-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await client.flushdb()
        async with serve(rx) as base, serve(gateway.app()) as gw:
            procs = start_replicas(redis_url, sinks_toml(base, gw), logs)
            await wait_started(client, procs)
            per_queue = args.entries // len(CAUSES)
            marks = Marks(pushed=time.time())
            async with client.pipeline(transaction=False) as pipe:
                for queue in CAUSES:
                    for i in range(0, per_queue, 500):
                        batch = [entry(queue, j) for j in range(i, min(i + 500, per_queue))]
                        pipe.lpush(f"dead_letter:{queue}", *batch)
                await pipe.execute()
            push_s = time.time() - marks.pushed
            await watch(client, rx, marks, args, procs)
            once = await exactly_once(client, per_queue)
            undeliverable = int(await client.llen(keys.UNDELIVERABLE))
        report(args, rx, gateway, marks, push_s, once, undeliverable, logs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        await client.aclose()
        if server:
            server.stop()


async def wait_started(client: aioredis.Redis, procs: list[subprocess.Popen[bytes]]) -> None:
    """Until every replica has a heartbeat in Redis (they are claiming)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a replica exited at start; see its log")
        if await client.exists(*(keys.heartbeat(f"storm-{n}") for n in range(REPLICAS))) == REPLICAS:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("replicas did not all start")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def is_critical(body: dict[str, Any]) -> bool:
    return CRITICAL_QUEUE in json.dumps(body)


def report(args: argparse.Namespace, rx: Receivers, gateway: FakeGateway, marks: Marks, push_s: float,
           once: tuple[int, int, int], undeliverable: int, logs: Path) -> None:
    t0, window = marks.pushed, args.observe
    target = args.entries - args.entries % len(CAUSES)
    print(f"storm: {target:,} dead letters of {len(CAUSES)} causes pushed in {push_s:.2f} s; {REPLICAS} replicas, "
          f"replica 0 killed -9 at +{(marks.killed or t0) - t0:.1f} s (not restarted); gateway "
          f"{args.gateway_latency * 1000:.0f} ms; observed {window:.0f} s; logs in {logs}")
    archived, distinct, dups = once
    if marks.archived is None:
        print(f"  archived: NOT all within the window ({archived:,} of {target:,})  MISSED")
    else:
        took = marks.archived - t0
        print(f"  every entry archived after {took:.1f} s (target <= 60 s: {verdict(took <= 60)}); "
              f"{archived:,} archived, {distinct:,} distinct, {dups} duplicates "
              f"(exactly once: {verdict(archived == distinct == target)})")
        rest = f"+{marks.rest_archived - t0:.1f} s" if marks.rest_archived else "n/a"
        print(f"         all but the {marks.held_by_killed} entries the killed replica held archived at {rest}; "
              "those came back through the reaper (heartbeat_ttl_s 30, reap_interval_s 15)")
    storm_slack = [(at, b) for at, b in rx.slack if not is_critical(b)]
    crit_slack = [at for at, b in rx.slack if is_critical(b)]
    first = (storm_slack[0][0] - t0) if storm_slack else None
    print(f"  Slack: {len(rx.slack)} messages in the first {window:.0f} s, {len(storm_slack)} for the storm "
          f"(target <= 10: {verdict(len(rx.slack) <= 10)}); first card at "
          + (f"+{first:.1f} s (target <= {GROUP_WAIT_S + 5:.0f} s: {verdict(first <= GROUP_WAIT_S + 5)})"
             if first is not None else "never  MISSED"))
    print("         arrivals at +" + ", +".join(f"{at - t0:.1f}" for at, _ in rx.slack) + " s")
    print(f"  429s provoked: Slack {rx.slack_429}, PagerDuty {rx.pagerduty_429} "
          f"(target 0: {verdict(rx.slack_429 + rx.pagerduty_429 == 0)})")
    storm_pd = [b for _, b in rx.pagerduty if not is_critical(b)]
    keys_pd = Counter(str(b.get("dedup_key")) for b in storm_pd)
    print(f"  PagerDuty: {len(rx.pagerduty)} events, {len(storm_pd)} for the storm (target <= 10: "
          f"{verdict(len(storm_pd) <= 10)}); storm dedup_keys {len(keys_pd)} for {len(CAUSES)} causes "
          f"(target one per cause: {verdict(len(keys_pd) == len(CAUSES))}): "
          + ", ".join(f"{k} x{n}" for k, n in keys_pd.items()))
    jobs = Counter(j for _, j in rx.hook)
    storm_jobs = {j for j in jobs if j != CRITICAL_JOB}
    took_hook = f"all after +{marks.webhook_all - t0:.1f} s" if marks.webhook_all else "NOT all"
    same_key = all(len(k) == 1 for k in rx.hook_keys.values())
    print(f"  webhook: {len(storm_jobs):,} of {target:,} storm jobs ({verdict(len(storm_jobs) == target)}), "
          f"{len(rx.hook):,} posts ({sum(n - 1 for n in jobs.values())} repeats, each with its job's one "
          f"Idempotency-Key: {same_key}), {took_hook}")
    print(f"  gateway calls: {gateway.calls} for {len(CAUSES)} storm causes + 1 critical cause "
          f"(target ~ one per cause: {verdict(gateway.calls <= len(CAUSES) + 1 + REPLICAS)}); "
          f"peak in flight {gateway.peak_in_flight}")
    critical(marks, rx, crit_slack)
    print(f"  undeliverable records: {undeliverable}")


def critical(marks: Marks, rx: Receivers, crit_slack: list[float]) -> None:
    crit_pd = [at for at, b in rx.pagerduty if is_critical(b)]
    if marks.critical_pushed is None:
        print("  critical: never pushed")
        return
    claimed = marks.critical_claimed or marks.critical_pushed
    limit = GROUP_WAIT_S + 5
    parts = []
    for name, arrivals in (("Slack", crit_slack), ("PagerDuty", crit_pd)):
        if arrivals:
            took = arrivals[0] - claimed
            parts.append(f"{name} +{took:.1f} s ({verdict(took <= limit)})")
        else:
            parts.append(f"{name} never (MISSED)")
    print(f"  critical dead letter of a 3rd cause pushed at +{marks.critical_pushed - marks.pushed:.1f} s, "
          f"claimed {claimed - marks.critical_pushed:.2f} s later; reached " + ", ".join(parts)
          + f" after its claim (target <= {limit:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--observe", type=float, default=300.0, help="seconds watched after the push")
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds after the push replica 0 gets -9")
    parser.add_argument("--critical-after", type=float, default=5.0, help="seconds after the push")
    parser.add_argument("--gateway-latency", type=float, default=0.8)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(storm(args))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(storm(args))


if __name__ == "__main__":
    main()
