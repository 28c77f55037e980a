"""Running the real `dlq-bridge` CLI as a subprocess, for kill -9 and service tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


def write_config(path: Path, sections: dict[str, dict[str, Any] | list[dict[str, Any]]]) -> Path:
    lines: list[str] = []
    for name, value in sections.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            lines.append(f"[[{name}]]" if isinstance(value, list) else f"[{name}]")
            lines.extend(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in item.items())
    path.write_text("\n".join(lines) + "\n")
    return path


def start_bridge(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, stdout: Any = None
) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "bridge", *args],
        cwd=cwd,
        env=full_env,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_healthz(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> dict[str, Any]:
    """Poll /healthz until 200; fails with the process's stderr if it died."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"bridge exited with {proc.returncode}: {err[-2000:]}")
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0)
            last = response
            if response.status_code == 200:
                return dict(response.json())
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"/healthz never answered 200 (last: {last})")


def terminate(proc: subprocess.Popen[Any], timeout_s: float = 10.0) -> None:
    """SIGTERM, wait up to `timeout_s`, then SIGKILL: a child process stopped whatever state it is in."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kill9(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


async def kill_at_random_points(
    config: Path, progress: Any, *, until: int, rng: Any, step: tuple[int, int], max_kills: int = 4
) -> int:
    """Start the bridge and SIGKILL it each time `progress()` advanced by a random step.

    Stops after `max_kills`, or once `progress()` reaches `until`; returns the kill count.
    """
    import asyncio

    kills = 0
    while kills < max_kills and progress() < until:
        target = progress() + rng.randint(*step)
        proc = start_bridge(["--config", str(config), "run"])
        deadline = time.monotonic() + 30
        while progress() < target and time.monotonic() < deadline and proc.poll() is None:
            await asyncio.sleep(0.002)
        kill9(proc)
        kills += 1
    return kills


async def run_until(config: Path, done: Any, timeout_s: float = 90.0) -> int:
    """Start the bridge, wait for `await done()`, SIGTERM it; returns its exit code."""
    import asyncio

    proc = start_bridge(["--config", str(config), "run"])
    deadline = time.monotonic() + timeout_s
    while not await done() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    return int(await asyncio.to_thread(proc.wait, 20))


async def archived(client: Any, source: str) -> int:
    """Entries of `source` in its archive (async client)."""
    from bridge.stores import keys

    return int(await client.llen(keys.alerted(source)))


async def remaining(client: Any, source: str) -> int:
    """Entries still in `source` or in any processing list, plus alerts handed off and not yet
    delivered (outboxes, sink queues: docs/design.md section 5b) (async client)."""
    processing = [k async for k in client.scan_iter(match="dlq_bridge:processing:*")]
    claimed = int(await client.llen(source)) + sum([int(await client.llen(k)) for k in processing])
    return claimed + await undelivered(client)


async def undelivered(client: Any) -> int:
    """Alerts in any outbox or sink queue (ready or leased) (async client)."""
    outboxes = [k async for k in client.scan_iter(match="dlq_bridge:outbox:*")]
    queued = [k async for k in client.scan_iter(match="dlq_bridge:sinkq:*", _type="zset")]
    return sum([int(await client.hlen(k)) for k in outboxes]) + sum([int(await client.zcard(k)) for k in queued])


def wait_for(predicate: Callable[[], object], timeout_s: float, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is truthy or `timeout_s` has passed; whether it became truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
