"""Helpers shared by the bench scripts: a Redis to bench on, entry makers, RSS."""

from __future__ import annotations

import json
import os
import resource
import tempfile
from pathlib import Path

from bridge.embedded import EmbeddedRedis, port_answers
from bridge.settings import Settings, load_settings


def bench_redis_url() -> tuple[str, EmbeddedRedis | None]:
    """$DLQ_BRIDGE_BENCH_REDIS_URL, else the local server (db 14), else an embedded one."""
    given = os.environ.get("DLQ_BRIDGE_BENCH_REDIS_URL")
    if given:
        return given, None
    if port_answers(6379):
        return "redis://127.0.0.1:6379/14", None
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-bench-")), 6399, appendonly=False)
    return server.start(), server


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
