"""Helpers for operator-command tests: configs on disk and the CLI in a subprocess."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import _to_toml

ROOT = Path(__file__).resolve().parents[2]


def write_config(path: Path, redis_url: str, **sections: Any) -> Path:
    """A TOML config on the test Redis; keyword sections are added or replace defaults."""
    data: dict[str, Any] = {"redis": {"url": redis_url, "consumer_id": "ops-test"}}
    data.update(sections)
    path.write_text(_to_toml(data))
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any DLQ_BRIDGE_* or secret variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLQ_BRIDGE_")}
    for name in ("OPENCLAW_GATEWAY_TOKEN", "SLACK_WEBHOOK_URL", "PAGERDUTY_ROUTING_KEY"):
        env.pop(name, None)
    env.update(extra)
    return env


@dataclass
class Done:
    code: int
    out: str
    err: str


async def cli(config: Path, *args: str, env: dict[str, str] | None = None) -> Done:
    """`python -m bridge --config CONFIG ARGS…` without blocking the event loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), *args,
        cwd=ROOT, env=env or clean_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def cli_sync(config: Path, *args: str) -> Done:
    proc = subprocess.run(
        [sys.executable, "-m", "bridge", "--config", str(config), *args],
        cwd=ROOT, env=clean_env(), capture_output=True, timeout=60, check=False,
    )
    return Done(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
