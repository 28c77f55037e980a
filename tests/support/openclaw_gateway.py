"""The real OpenClaw gateway (npm `openclaw`, Node 24) as a child process, for tests and benches.

`scripts/install-gateway` installs both into tests/gateway/node_modules from
the lock file. The gateway runs with the shipped hardened config,
deploy/openclaw/openclaw.json5, unchanged except for what the environment and
the command line fill in (token, model server, port) and, for the
"endpoint disabled" case, the one `chatCompletions` switch turned off. Its
state (sessions, caches) lives in a private folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.process import stop_group
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_DIR = ROOT / "tests" / "gateway"
CONFIG = ROOT / "deploy" / "openclaw" / "openclaw.json5"
NODE = GATEWAY_DIR / "node_modules" / ".bin" / "node"
ENTRY = GATEWAY_DIR / "node_modules" / "openclaw" / "openclaw.mjs"
AGENT = "dlq-summarizer"
MODEL_ID = "fake-summarizer"
MIN_NODE = (24, 16)
ENDPOINT_ON = "chatCompletions: { enabled: true }"


def find_gateway() -> str:
    """"" when the Node 24 runtime and openclaw are installed, else why not."""
    if not NODE.exists() or not ENTRY.exists():
        return f"OpenClaw gateway not installed in {GATEWAY_DIR}/node_modules (run scripts/install-gateway)"
    try:
        version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Node runtime {NODE} does not run here ({type(exc).__name__})"
    parts = tuple(int(p) for p in version.lstrip("v").split(".")[:2])
    if parts < MIN_NODE:
        return f"openclaw needs Node >= 24.16, found {version}"
    return ""


def render_config(dest: Path, *, chat_endpoint: bool = True) -> Path:
    """The shipped config, with the chat endpoint switched off when asked."""
    text = CONFIG.read_text(encoding="utf-8")
    assert ENDPOINT_ON in text, "deploy/openclaw/openclaw.json5 no longer enables the endpoint as expected"
    if not chat_endpoint:
        text = text.replace(ENDPOINT_ON, "chatCompletions: { enabled: false }")
    dest.write_text(text, encoding="utf-8")
    return dest


@dataclass
class Gateway:
    url: str
    token: str
    workdir: Path
    process: subprocess.Popen[bytes]

    @property
    def log(self) -> str:
        path = self.workdir / "gateway.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def state_bytes(self, *parts: str) -> int:
        """Bytes on disk under the gateway's state dir (or a sub-folder of it)."""
        top = self.workdir.joinpath("state", *parts)
        return sum(f.stat().st_size for f in top.rglob("*") if f.is_file())

    def stop(self) -> None:
        stop_group(self.process)


def gateway_env(workdir: Path, model_url: str, token: str, config: Path) -> dict[str, str]:
    path = f"{NODE.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return {
        "PATH": path, "HOME": str(workdir / "home"), "TMPDIR": str(workdir / "tmp"),
        "LANG": "C.UTF-8", "OPENCLAW_STATE_DIR": str(workdir / "state"),
        "OPENCLAW_CONFIG_PATH": str(config), "OPENCLAW_GATEWAY_TOKEN": token,
        "DLQ_MODEL_BASE_URL": f"{model_url}/v1", "DLQ_MODEL_API_KEY": "fake-model-key",
        "DLQ_MODEL_ID": MODEL_ID, "OPENCLAW_DISABLE_BONJOUR": "1", "OPENCLAW_NO_AUTO_UPDATE": "1",
    }


def start_gateway(
    model_url: str, workdir: Path, *, token: str, chat_endpoint: bool = True, timeout_s: float = 180
) -> Gateway:
    """Start `openclaw gateway run` on a free loopback port; returns once it answers HTTP."""
    for sub in ("home", "tmp", "state"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    config = render_config(workdir / "openclaw.json5", chat_endpoint=chat_endpoint)
    port = free_port()
    log = (workdir / "gateway.log").open("wb")
    process = subprocess.Popen(
        [str(NODE), str(ENTRY), "gateway", "run", "--port", str(port), "--bind", "loopback"],
        cwd=workdir, env=gateway_env(workdir, model_url, token, config),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    gateway = Gateway(f"http://127.0.0.1:{port}", token, workdir, process)
    try:
        _wait_ready(gateway, timeout_s)
    except BaseException:
        gateway.stop()
        raise
    return gateway


def _wait_ready(gateway: Gateway, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            raise RuntimeError(f"gateway exited ({gateway.process.returncode}):\n{gateway.log[-3000:]}")
        if "[gateway] ready" in gateway.log and http_status(gateway, "GET", "/") == 200:
            return
        time.sleep(0.25)
    raise RuntimeError(f"gateway not ready within {timeout_s:g}s:\n{gateway.log[-3000:]}")


def http_status(gateway: Gateway, method: str, path: str, body: dict[str, object] | None = None,
                *, token: str | None = None, timeout_s: float = 120) -> int:
    """The HTTP status of one request (0 when nothing answered)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(gateway.url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {token or gateway.token}", "Content-Type": "application/json",
        "x-openclaw-agent-id": AGENT,
    })
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def chat_body(user_text: str) -> dict[str, object]:
    return {"model": f"openclaw/{AGENT}", "temperature": 0,
            "messages": [{"role": "user", "content": user_text}]}
