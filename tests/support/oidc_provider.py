"""A real OpenID provider for the sign-in tests: npm's oidc-provider, run by tests/support/oidc/provider.mjs.

`scripts/install-oidc-provider` installs it. It runs on the gateway's Node 24
when scripts/install-gateway put one in tests/gateway, else on the system's
`node` (oidc-provider 9 runs on Node 20, with a warning that it prefers 22+).
Its development login form accepts any name: `vera` is in group `staff`, `otto`
in `staff` and `sre`, `ada` in `sre-leads`.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.bridge_process import terminate
from tests.support.redis_server import free_port

HERE = Path(__file__).with_name("oidc")
GATEWAY_NODE = Path(__file__).resolve().parents[1] / "gateway" / "node_modules" / ".bin" / "node"
CLIENT_ID = "dlq-console"


def node() -> str | None:
    return str(GATEWAY_NODE) if GATEWAY_NODE.exists() else shutil.which("node")


def provider_missing() -> str | None:
    """Why the provider cannot run here; None when it can."""
    if node() is None:
        return "node is missing (the system's, or tests/gateway's after scripts/install-gateway)"
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        return "npm's oidc-provider is missing (run scripts/install-oidc-provider)"
    return None


@dataclass(frozen=True)
class Provider:
    issuer: str


@contextlib.contextmanager
def oidc_provider(redirect_uri: str, timeout_s: float = 20.0) -> Iterator[Provider]:
    """Start the provider on a free port; yield its issuer; stop it."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([str(node()), "provider.mjs", str(port), issuer, redirect_uri], cwd=HERE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready" not in line or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"oidc-provider did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
        yield Provider(issuer)
    finally:
        terminate(proc)
