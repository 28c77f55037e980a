"""Helpers shared by the bench scripts: a Redis to bench on, entry makers, RSS."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from bridge.clients.embedded import EmbeddedRedis
from bridge.settings import Settings, load_settings

T = TypeVar("T")


def bench_redis_url(db: int = 14) -> tuple[str, EmbeddedRedis | None]:
    """$DLQ_BRIDGE_BENCH_REDIS_URL (a database the bench may flush), else a private server of its own.

    A bench never looks for a Redis by itself: it flushes its database, so it only
    uses one it started or one it was explicitly given.
    """
    given = os.environ.get("DLQ_BRIDGE_BENCH_REDIS_URL")
    if given:
        return given, None
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-bench-")), _free_port(), appendonly=False)
    server.start()
    return f"redis://127.0.0.1:{server.port}/{db}", server


def on_bench_redis(db: int, main: Callable[[str], Coroutine[Any, Any, T]]) -> T:
    """Run `main(url)` against `bench_redis_url(db)`, stopping a private server afterwards."""
    url, server = bench_redis_url(db)
    try:
        return asyncio.run(main(url))
    finally:
        if server:
            server.stop()


def jobs_bench_main(doc: str, db: int, main: Callable[[str, int], Coroutine[Any, Any, None]]) -> None:
    """The `main()` of a bench taking `--jobs N` (default 3000): parse it, run `main(url, N)`."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    jobs = parser.parse_args().jobs
    on_bench_redis(db, lambda url: main(url, jobs))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_settings(redis_url: str, toml: str = "", concurrency: int = 64) -> Settings:
    path = Path(tempfile.mkdtemp()) / "bench.toml"
    path.write_text(
        f'[redis]\nurl = "{redis_url}"\nconsumer_id = "bench"\n'
        f"[sources]\nconcurrency = {concurrency}\npoll_interval_s = 0.01\narchive_max = 100000\n{toml}"
    )
    return load_settings(path, dict(os.environ))


def distinct_entry(i: int, queue: str = "bench") -> bytes:
    """Each entry a distinct failure (distinct job name), so no summary cache helps."""
    return json.dumps(
        {
            "queue": queue,
            "job_id": f"job-{i}",
            "job_name": f"task_{i}",
            "attempts": 3,
            "last_error": f"RuntimeError: worker {i} failed on step alpha",
            "payload_excerpt": '{"k": "v"}',
        }
    ).encode()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on uvloop when installed: the loop `dlq-bridge run` gets from uvicorn."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def peers_toml(peers_url: str, *, transport: str = "aiohttp", max_concurrency: int = 32) -> str:
    """[http], [openclaw] at the fake gateway, one webhook sink at the receiver (bench secrets inline)."""
    return (
        f'[http]\ntransport = "{transport}"\n'
        f'[openclaw]\nurl = "{peers_url}"\ntoken = "bench-token"\n'
        f"max_concurrency = {max_concurrency}\ncalls_per_minute = 0\ntimeout_s = 20\n"
        f'[[sinks]]\nname = "hook"\ntype = "webhook"\nurl = "{peers_url}/hook/bridge"\n'
        f'secret = "bench-webhook-secret"\n'
    )


def service_config(redis_url: str, port: int, consumer: str, extra_toml: str = "") -> Path:
    """A TOML file for `python -m bridge --config <file> run` (service defaults otherwise)."""
    path = Path(tempfile.mkdtemp(prefix="dlqb-bench-")) / "bridge.toml"
    path.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = {port}\nlog_level = "warning"\n'
        f'[redis]\nurl = "{redis_url}"\nconsumer_id = "{consumer}"\n'
        f"[sources]\narchive_max = 100000\n{extra_toml}"
    )
    return path


def vm_kb(pid: int, field: str) -> int:
    """A `/proc/<pid>/status` field in kB (VmRSS, VmHWM), 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


async def drain(settings: Settings) -> float:
    """In process: `open_runtime` + `pipeline.run(burst=True)`; seconds from start to empty DLQs."""
    from bridge.runtime import freeze_heap, open_runtime

    async with open_runtime(settings) as runtime:
        freeze_heap()  # as the service does once started (bridge/app.py)
        started = time.perf_counter()
        await runtime.pipeline.run(asyncio.Event(), burst=True)
        return time.perf_counter() - started


def push_entries(redis_url: str, source: str, entries: Iterable[bytes]) -> int:
    """Flush the bench db, then LPUSH `entries` to `source` in batches; the count pushed."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    batch: list[bytes] = []
    pushed = 0
    with client.pipeline(transaction=False) as pipe:
        for entry in entries:
            batch.append(entry)
            if len(batch) == 1000:
                pipe.lpush(source, *batch)
                pushed, batch = pushed + len(batch), []
        if batch:
            pipe.lpush(source, *batch)
            pushed += len(batch)
        pipe.execute()
    client.close()
    return pushed


async def read_body(receive: Any) -> bytes:
    """A raw ASGI request's whole body (the benches' fake receivers add no framework latency)."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)
