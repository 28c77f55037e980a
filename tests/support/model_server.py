"""Our small OpenAI-compatible model server (tools/model-server, node-llama-cpp) as a child process.

`scripts/install-model` puts the GGUF weights in ~/.cache/dlq-bridge/models
(or $DLQ_BRIDGE_MODELS) and node-llama-cpp with a Node 24 runtime in
tools/model-server/node_modules. `find_model` says why not when either is
missing, so the real-model tests skip with the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.process import stop_group

ROOT = Path(__file__).resolve().parents[2]
SERVER_DIR = ROOT / "tools" / "model-server"
NODE = SERVER_DIR / "node_modules" / ".bin" / "node"
SERVER = SERVER_DIR / "server.mjs"
RUNTIME = SERVER_DIR / "node_modules" / "node-llama-cpp" / "package.json"


def model_path(name: str = "qwen15") -> Path:
    cache = Path(os.environ.get("DLQ_BRIDGE_MODELS", Path.home() / ".cache" / "dlq-bridge" / "models"))
    return cache / f"{name}.gguf"


def find_model(name: str = "qwen15") -> str:
    """"" when the model and the runtime are installed, else why not."""
    if not model_path(name).is_file() or not model_path(name).with_suffix(".gguf.sha256").is_file():
        return f"model {name} not installed at {model_path(name)} (run MODEL={name} scripts/install-model)"
    if not NODE.exists() or not RUNTIME.exists():
        return f"node-llama-cpp not installed in {SERVER_DIR}/node_modules (run scripts/install-model)"
    return ""


@dataclass
class ModelServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def calls(self) -> list[str]:
        """One JSON line per completed call (seconds, prompt size, response_format)."""
        return self.log_path.read_text().splitlines() if self.log_path.exists() else []

    def stop(self) -> None:
        stop_group(self.process)


def start_model_server(workdir: Path, name: str = "qwen15", *, threads: int | None = None,
                       timeout_s: float = 300) -> ModelServer:
    """Start the server on a free loopback port; returns once the model is loaded.

    Threads: `threads`, else $DLQ_BRIDGE_MODEL_THREADS, else 2 (one per core of an idle 2-core
    machine; on a machine busy with other work, 1 is faster: llama.cpp's threads wait on each other).
    """
    threads = threads or int(os.environ.get("DLQ_BRIDGE_MODEL_THREADS", "2"))
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}-calls.jsonl"
    process = subprocess.Popen(
        [str(NODE), str(SERVER), "--model", str(model_path(name)), "--port", "0",
         "--threads", str(threads), "--log", str(log_path)],
        cwd=SERVER_DIR, stdout=subprocess.PIPE, stderr=(workdir / f"{name}-server.err").open("wb"),
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    buffered = b""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = (workdir / f"{name}-server.err").read_text(errors="replace")
            raise RuntimeError(f"model server exited ({process.returncode}):\n{err[-3000:]}")
        buffered += process.stdout.read() or b""
        if b"listening " in buffered:
            port = int(buffered.split(b"listening ", 1)[1].split()[0])
            return ModelServer(f"http://127.0.0.1:{port}", process, log_path)
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    raise RuntimeError(f"model server did not load {name} within {timeout_s:g}s")
