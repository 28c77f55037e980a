"""The CLI keeps its own word (issue 34): `run` says where it listens and `GET /` leads to the console;
one "started embedded Redis" per process, however many times a command opens Redis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.bridge_process import start_bridge, terminate, wait_healthz, write_config
from tests.support.ops import ROOT, clean_env
from tests.support.redis_server import free_port


def test_run_logs_where_it_listens_and_the_root_leads_to_the_console(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    config = write_config(tmp_path / "b.toml", {"redis": {"url": redis_url, "consumer_id": "root-test"},
                                                 "server": {"port": port}, "console": {"enabled": True}})
    proc = start_bridge(["--config", str(config), "run"], env=clean_env())
    try:
        wait_healthz(port, proc)
        root = httpx.get(f"http://127.0.0.1:{port}/", follow_redirects=False, timeout=5)
        page = httpx.get(f"http://127.0.0.1:{port}/", follow_redirects=True, timeout=5)
    finally:
        terminate(proc)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert f"listening on http://127.0.0.1:{port} (/healthz, /metrics, /console/)" in err, err[-2000:]
    assert root.status_code == 307 and root.headers["location"] == "/console/"
    assert page.status_code == 200 and str(page.url).endswith("/console/")


def test_check_on_the_embedded_redis_starts_it_once(tmp_path: Path) -> None:
    config = write_config(tmp_path / "b.toml", {"redis": {"embedded_port": free_port(),
                                                           "data_dir": str(tmp_path / "data")}})
    proc = subprocess.run([sys.executable, "-m", "bridge", "--config", str(config), "check"], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("started embedded Redis") == 1, proc.stderr
