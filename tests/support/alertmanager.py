"""A real Alertmanager (Debian's `prometheus-alertmanager`) on a free loopback port, for sink tests.

Its one receiver is a webhook of the test's own (`webhook_url`), with `send_resolved`. Clustering is
off, storage is a temporary directory; the process is ended when the context exits.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.bridge_process import terminate
from tests.support.peers import INSTALL_HINT
from tests.support.redis_server import free_port

BINARY_NAMES = ("prometheus-alertmanager", "alertmanager")

CONFIG = """\
route:
  receiver: hook
  group_by: {group_by}
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: "{webhook_url}"
        send_resolved: true
"""


def binary() -> str:
    """The Alertmanager binary, or skip saying why."""
    for name in BINARY_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"Alertmanager is not installed (Debian's prometheus-alertmanager: {INSTALL_HINT})")
    raise AssertionError  # unreachable


@contextlib.contextmanager
def alertmanager(tmp: Path, webhook_url: str, group_by: str = "['alertname', 'queue', 'fingerprint']") -> Iterator[str]:
    """Start Alertmanager; yields its base URL once `/-/ready` answers."""
    exe = binary()
    port = free_port()
    config = tmp / "alertmanager.yml"
    config.write_text(CONFIG.format(group_by=group_by, webhook_url=webhook_url))
    (tmp / "am-data").mkdir(exist_ok=True)
    log = (tmp / "alertmanager.log").open("w")
    proc = subprocess.Popen(
        [exe, f"--config.file={config}", f"--storage.path={tmp / 'am-data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, tmp / "alertmanager.log")
        yield base
    finally:
        terminate(proc)
        log.close()


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"alertmanager exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/-/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"alertmanager not ready: {log.read_text()[-2000:]}")
