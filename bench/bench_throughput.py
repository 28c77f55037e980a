"""Drain throughput: the bridge (both HTTP transports) against a sequential baseline worker.

Every entry is a distinct failure (distinct job name, so a distinct
fingerprint: the summary cache cannot help) and costs one gateway call and
one signed webhook POST. The peers (fake OpenClaw gateway answering at once,
webhook receiver) run in their own process (`bench/peers.py`).

- bridge: in process, `open_runtime(settings)` + `pipeline.run(burst=True)` on
  uvloop (what `dlq-bridge run` gets from uvicorn), `[http] transport` =
  aiohttp and httpx, each on its own fresh set of entries.
- baseline: the obvious alternative, a classic reliable-queue worker with
  redis-py and plain `httpx.Client` (default transport), one entry at a time:
  BLMOVE → POST gateway → parse → POST signed webhook → LREM.

    python -m bench.bench_throughput [--entries 20000] [--baseline-entries 5000] [--httpx-entries 5000]
    python -m bench.bench_throughput --gateway-latency 0.02 --entries 5000 --baseline-entries 300
    python -m bench.bench_throughput --entries 20000 --transports "" --processes 1,2 --runs 5  # 1 vs 2 services
    python -m bench.bench_throughput --entries 4000 --baseline-entries 1500 --transports aiohttp --runs 3

Each bridge row is the median of `--runs` drains on fresh entries: CPU ms per entry (this
process, intake threads included), entries/s, Redis commands per entry (`INFO commandstats`
delta; a script's own commands are listed beside its EVALSHA), round trips per entry (this
process's redis.asyncio writes: one per command or pipeline batch) and asyncio tasks per
entry (a task factory counter). `--detail` lists the commands and tasks.

`--processes 1,2` runs the real service (`python -m bridge run`, service defaults) as one,
then two processes, `--runs` times interleaved (1, 2, 1, 2, ...; the medians are compared,
since a shared machine drifts). Each run waits until every process serves the DLQ, then
times the first LPUSH to the last receipt, and reads where the machine's CPU went (bridges,
peers, Redis, the rest, idle) over the whole drain and over its steady part (10-90% of the
receipts), with the Redis commands per entry.

Redis: $DLQ_BRIDGE_BENCH_REDIS_URL (a database it may flush), else a private server of its own.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import signal
import statistics
import time
from typing import Any

import httpx
import redis

from bench.common import (
    bench_redis_url,
    bench_settings,
    distinct_entry,
    drain,
    peers_toml,
    push_entries,
    run,
    service_config,
)
from bench.cpu_share import Share, Snapshot
from bench.peers import PeersProcess, free_port
from bench.probe import RoundTrips, TaskCounter, commandstats
from bridge.summarize.prompt import default_prompt_dir
from tests.support.bridge_process import start_bridge, wait_healthz

BENCH_DB = 13
SECRET = b"bench-webhook-secret"


def push(url: str, queue: str, n: int) -> str:
    """Flush the bench db and LPUSH `n` distinct entries to `dead_letter:<queue>`."""
    source = f"dead_letter:{queue}"
    push_entries(url, source, (distinct_entry(i, queue) for i in range(n)))
    return source


async def counted_drain(settings: Any, tasks: TaskCounter) -> float:
    tasks.install()
    return await drain(settings)


def drain_bridge(
    url: str, peers: PeersProcess, transport: str, args: argparse.Namespace, tasks: TaskCounter
) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this (the bridge's) process for one drain."""
    toml = peers_toml(peers.url, transport=transport, max_concurrency=args.gateway_concurrency)
    settings = bench_settings(url, toml, concurrency=args.concurrency)
    cpu = time.process_time()
    seconds = run(counted_drain(settings, tasks))
    return seconds, time.process_time() - cpu


def one_drain(url: str, peers: PeersProcess, transport: str, args: argparse.Namespace, n: int) -> dict[str, Any]:
    push(url, f"tp-{transport}", n)
    peers.reset()
    before = commandstats(url)
    trips, tasks = RoundTrips(), TaskCounter()
    with trips.installed():
        seconds, cpu = drain_bridge(url, peers, transport, args, tasks)
    commands = commandstats(url) - before
    commands["info"] -= 1  # our own INFO
    stats = peers.stats()
    return {"n": n, "seconds": seconds, "cpu": cpu, "round_trips": trips.count, "tasks": tasks.count,
            "task_names": tasks.by_name, "commands": +commands, **stats}


def bench_bridge(url: str, peers: PeersProcess, transport: str, args: argparse.Namespace) -> dict[str, Any]:
    """`args.runs` drains on fresh entries; the median of each figure."""
    n = args.entries if transport == "aiohttp" else args.httpx_entries
    runs = [one_drain(url, peers, transport, args, n) for _ in range(args.runs)]
    middle = sorted(runs, key=lambda r: r["cpu"])[len(runs) // 2]
    return {
        **middle,
        "name": f"bridge, transport {transport}",
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "round_trips": statistics.median(r["round_trips"] for r in runs),
        "tasks": statistics.median(r["tasks"] for r in runs),
        "runs": [(r["n"] / r["seconds"], r["cpu"] / r["n"] * 1000) for r in runs],
    }


def bench_services(url: str, peers: PeersProcess, args: argparse.Namespace, processes: int) -> dict[str, Any]:
    """The bridge as `processes` services (`python -m bridge run`, one consumer id each).

    Timed from the first LPUSH to the last receipt, once every process serves the DLQ (a
    process finds a new DLQ on its next SCAN, up to `rescan_interval_s` later: that start-up
    lag is not drain throughput). CPU is also read between 10% and 90% of the receipts,
    the steady part of the drain.
    """
    source = "dead_letter:tp-services"
    toml = peers_toml(peers.url, max_concurrency=args.gateway_concurrency)
    if args.service_concurrency:
        toml = f"concurrency = {args.service_concurrency}\n{toml}"  # lands in service_config's [sources]
    batches = [[distinct_entry(i, "tp-services") for i in range(start, min(args.entries, start + 1000))]
               for start in range(0, args.entries, 1000)]
    procs, ports = [], []
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        for i in range(processes):
            ports.append(free_port())
            procs.append(start_bridge(["--config", str(service_config(url, ports[-1], f"bench-{i}", toml)), "run"]))
            wait_healthz(ports[-1], procs[-1])
        warm_up(client, source, ports, peers)
        pids = [p.pid for p in procs]

        def snap(posts: int) -> Snapshot:
            return Snapshot.take(time.time(), posts, pids, peers.pid, url)

        first, commands = snap(0), commandstats(url)
        for batch in batches:
            client.lpush(source, *batch)
        ten = snap(peers.wait_posts(args.entries // 10, 600)["webhook_posts"])
        ninety = snap(peers.wait_posts(args.entries * 9 // 10, 600)["webhook_posts"])
        stats = peers.wait_posts(args.entries, 600)
        last, commands = snap(stats["webhook_posts"]), commandstats(url) - commands
    finally:
        client.close()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    whole = Share.between(first, last)
    name = f"{processes} x `python -m bridge run`, aiohttp"
    return {"name": name, "n": stats["webhook_posts"], "seconds": stats["last_post"] - first.at,
            "cpu": whole.bridges_ms * whole.entries / 1000, "processes": processes, "whole": whole,
            "steady": Share.between(ten, ninety), "redis_commands": +commands, **stats}


def warm_up(client: redis.Redis, source: str, ports: list[int], peers: PeersProcess) -> None:
    """Keep warm-up entries in `source` until every process serves it; then wait for their receipts and reset.

    The list must stay non-empty for a while: a process finds a DLQ only when its SCAN sees
    the key, and another process may drain a lone entry before that.
    """
    peers.reset()
    pushed, deadline = 0, time.monotonic() + 60
    while not all(serves_a_dlq(port) for port in ports):
        if time.monotonic() > deadline:
            raise RuntimeError("the bridge processes did not all find the DLQ in 60 s")
        if client.llen(source) < 50:
            client.lpush(source, *(distinct_entry(10**9 + pushed + i, "tp-services") for i in range(50)))
            pushed += 50
        time.sleep(0.02)
    if peers.wait_posts(pushed, 60)["webhook_posts"] != pushed:
        raise RuntimeError(f"{pushed} warm-up entries did not all arrive")
    time.sleep(0.5)  # nothing else arrives
    peers.reset()


def serves_a_dlq(port: int) -> bool:
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0).text
    tracked = [line for line in metrics.splitlines() if line.startswith("dlq_bridge_sources_tracked ")]
    return bool(tracked) and float(tracked[0].split()[1]) >= 1


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median steady rate (runs of one process count)."""
    return sorted(runs, key=lambda r: r["steady"].rate)[len(runs) // 2]


def report_services(services: dict[int, list[dict[str, Any]]]) -> None:
    """Per process count: every run's rates, the median run's CPU per entry by part, and what the cores allow."""
    cores = os.cpu_count() or 1
    for procs, runs in services.items():
        rates = ", ".join(f"{r['n'] / r['seconds']:,.0f}/s ({r['steady'].rate:,.0f}/s steady)" for r in runs)
        print(f"  {procs} process(es), runs interleaved: {rates}")
        for label in ("whole", "steady"):
            share: Share = median_run(runs)[label]
            others = share.peers_ms + share.redis_ms + share.rest_ms
            ceiling = min(procs / (share.bridges_ms / procs), cores / (share.bridges_ms + others))
            print(f"    median run, {label:<6}: {share.describe()}; the cores allow at most {ceiling * 1000:,.0f}/s")
        commands, n = median_run(runs)["redis_commands"], median_run(runs)["n"]
        listed = ", ".join(f"{k} {v / n:.2f}" for k, v in commands.most_common() if v / n >= 0.05)
        print(f"    median run, Redis commands/entry {sum(commands.values()) / n:.2f}: {listed}")
    if 1 in services and 2 in services:
        whole = {p: statistics.median(r["n"] / r["seconds"] for r in services[p]) for p in (1, 2)}
        steady = {p: statistics.median(r["steady"].rate for r in services[p]) for p in (1, 2)}
        print(f"  2 processes / 1 process (medians): {whole[2] / whole[1]:.2f}x from the first LPUSH to the last "
              f"receipt, {steady[2] / steady[1]:.2f}x steady (10-90% of the receipts)")
        s1 = median_run(services[1])["steady"]
        others = s1.peers_ms + s1.redis_ms
        perfect = cores * s1.bridges_ms / (s1.bridges_ms + others)
        print(f"  bound: one process is bound by its core ({s1.bridges_ms:.3f} ms/entry); the peers and Redis cost "
              f"{others:.3f} ms/entry on the same {cores} cores, so two processes reach at most {perfect:.2f}x, "
              "even with no idle time and no extra cost per entry")


class BaselineWorker:
    """A classic reliable-queue worker: one entry at a time, sync redis-py + plain httpx."""

    def __init__(self, url: str, peers_url: str, source: str) -> None:
        self.redis = redis.Redis.from_url(url)
        self.http = httpx.Client(timeout=20.0)  # default transport
        self.source, self.processing = source, f"{source}:processing"
        self.gateway, self.hook = f"{peers_url}/v1/chat/completions", f"{peers_url}/hook/baseline"
        self.prompt = (default_prompt_dir() / "system.md").read_text()

    def summarize(self, entry: dict[str, Any]) -> dict[str, Any]:
        request = {"model": "openclaw/dlq-summarizer", "temperature": 0, "messages": [
            {"role": "system", "content": self.prompt}, {"role": "user", "content": json.dumps(entry)}]}
        headers = {"Authorization": "Bearer bench-token", "x-openclaw-agent-id": "dlq-summarizer"}
        response = self.http.post(self.gateway, json=request, headers=headers)
        response.raise_for_status()
        return dict(json.loads(response.json()["choices"][0]["message"]["content"]))

    def deliver(self, entry: dict[str, Any], summary: dict[str, Any]) -> None:
        body = json.dumps({"type": "dlq.alert", **entry, "summary": summary, "summary_source": "openclaw"},
                          separators=(",", ":")).encode()
        signature = hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "X-Signature": f"sha256={signature}",
                   "Idempotency-Key": f"{entry['queue']}:{entry['job_id']}"}
        self.http.post(self.hook, content=body, headers=headers).raise_for_status()

    def drain(self) -> tuple[int, float]:
        done, started, last = 0, time.perf_counter(), time.perf_counter()
        wait_s: Any = 0.1  # Redis >= 6 takes fractional seconds; the stubs say int
        while (raw := self.redis.blmove(self.source, self.processing, wait_s, "RIGHT", "LEFT")) is not None:
            entry = json.loads(raw)
            self.deliver(entry, self.summarize(entry))
            self.redis.lrem(self.processing, 1, raw)  # type: ignore[arg-type]  # bytes are fine
            done, last = done + 1, time.perf_counter()
        self.http.close()
        self.redis.close()
        return done, last - started


def bench_baseline(url: str, peers: PeersProcess, n: int) -> dict[str, Any]:
    source = push(url, "tp-baseline", n)
    peers.reset()
    cpu = time.process_time()
    done, seconds = BaselineWorker(url, peers.url, source).drain()
    cpu = time.process_time() - cpu
    return {"name": "baseline (sequential, httpx default)", "n": done, "seconds": seconds, "cpu": cpu,
            **peers.stats()}


def report(results: list[dict[str, Any]], detail: bool = False) -> None:
    base = next(r for r in results if r["name"].startswith("baseline"))
    base_rate = base["n"] / base["seconds"]
    for r in results:
        rate = r["n"] / r["seconds"]
        sources = ", ".join(f"{k} {v}" for k, v in r["summary_sources"].items() if v)
        print(f"  {r['name']:<38} {r['n']:>6} entries in {r['seconds']:6.2f} s = {rate:6,.0f} entries/s "
              f"({rate / base_rate:3.1f}x baseline), {r['cpu'] / r['n'] * 1000:.2f} ms CPU/entry; "
              f"gateway calls {r['gateway_calls']}, webhook posts {r['webhook_posts']} [{sources}]")
        if "commands" in r:
            report_probes(r, detail)


def report_probes(r: dict[str, Any], detail: bool) -> None:
    n = r["n"]
    runs = ", ".join(f"{rate:,.0f}/s {ms:.2f} ms" for rate, ms in r["runs"])
    print(f"    runs: {runs}")
    print(f"    Redis round trips/entry {r['round_trips'] / n:.2f}, commands/entry "
          f"{sum(r['commands'].values()) / n:.2f} (INFO commandstats, script bodies included), "
          f"asyncio tasks/entry {r['tasks'] / n:.2f}")
    if detail:
        listed = ", ".join(f"{k} {v / n:.2f}" for k, v in r["commands"].most_common() if v / n >= 0.01)
        print(f"    commands/entry: {listed}")
        named = ", ".join(f"{k} {v / n:.2f}" for k, v in r["task_names"].most_common() if v / n >= 0.01)
        print(f"    tasks/entry: {named}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--baseline-entries", type=int, default=5_000)
    parser.add_argument("--httpx-entries", type=int, default=5_000, help="entries for the httpx-transport run")
    parser.add_argument("--concurrency", type=int, default=64, help="sources.concurrency")
    parser.add_argument("--gateway-concurrency", type=int, default=32, help="openclaw.max_concurrency")
    parser.add_argument("--transports", default="aiohttp,httpx")
    parser.add_argument("--gateway-latency", type=float, default=0.0, help="seconds per gateway call (0: instant)")
    parser.add_argument("--processes", default="",
                        help="also run the bridge as N service processes (N consumer ids), from LPUSH to last "
                             "receipt; a list (1,2) runs each")
    parser.add_argument("--service-concurrency", type=int, default=0,
                        help="sources.concurrency of the service processes (0: the service default)")
    parser.add_argument("--runs", type=int, default=3,
                        help="in-process drains per transport, and runs per process count (median shown)")
    parser.add_argument("--detail", action="store_true", help="list Redis commands and tasks per entry")
    args = parser.parse_args()
    url, server = bench_redis_url(BENCH_DB)
    results: list[dict[str, Any]] = []
    services: dict[int, list[dict[str, Any]]] = {}
    load = os.getloadavg()[0]
    try:
        with PeersProcess(gateway_latency_s=args.gateway_latency) as peers:
            results.append(bench_baseline(url, peers, args.baseline_entries))
            for transport in filter(None, args.transports.split(",")):
                results.append(bench_bridge(url, peers, transport, args))
            for _ in range(args.runs if args.processes else 0):  # interleaved: 1, 2, 1, 2, ...
                for processes in map(int, filter(None, args.processes.split(","))):
                    services.setdefault(processes, []).append(bench_services(url, peers, args, processes))
    finally:
        redis.Redis.from_url(url).flushdb()
        if server:
            server.stop()
    print(f"load average before the run: {load:.2f}")
    gateway = f"gateway latency {args.gateway_latency * 1000:g} ms" if args.gateway_latency else "instant gateway"
    print(f"throughput: distinct failures, local peers ({gateway}, webhook receiver), sources.concurrency "
          f"{args.concurrency}, openclaw.max_concurrency {args.gateway_concurrency}")
    report(results + [median_run(runs) for runs in services.values()], args.detail)
    report_services(services)


if __name__ == "__main__":
    main()
