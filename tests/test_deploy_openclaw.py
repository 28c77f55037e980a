"""The OpenClaw gateway's deployment files (docs/openclaw.md), validated without docker or kubectl.

The hardened config itself is parsed with the json5 parser the gateway ships
(Node, from tests/gateway/node_modules) when it is installed: tools denied,
context injection off, endpoint on, token auth; and docs/openclaw.md shows
exactly that config.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.settings import load_settings
from tests.support.openclaw_gateway import CONFIG, GATEWAY_DIR, NODE, find_gateway

ROOT = Path(__file__).resolve().parents[1]
OPENCLAW = ROOT / "deploy" / "openclaw"


def pinned_version() -> str:
    return str(json.loads((GATEWAY_DIR / "package.json").read_text())["dependencies"]["openclaw"])


def json5(text: str) -> Any:
    reason = find_gateway()
    if reason:
        pytest.skip(reason)
    script = "const J=require(process.argv[1]);let s='';process.stdin.on('data',d=>s+=d)" \
             ".on('end',()=>console.log(JSON.stringify(J.parse(s))))"
    done = subprocess.run([str(NODE), "-e", script, str(GATEWAY_DIR / "node_modules" / "json5")],
                          input=text, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_shipped_config_is_hardened() -> None:
    config = json5(CONFIG.read_text())
    gateway = config["gateway"]
    assert gateway["auth"] == {"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"}
    assert gateway["http"]["endpoints"]["chatCompletions"]["enabled"] is True
    assert gateway["bind"] == "loopback"
    agent = config["agents"]["entries"]["dlq-summarizer"]
    assert agent["tools"]["deny"] == ["*"] and agent["contextInjection"] == "never"
    assert config["agents"]["defaults"]["contextInjection"] == "never"
    assert config["plugins"]["enabled"] is False
    assert config["models"]["providers"]["summarizer"]["api"] == "openai-completions"


def test_docs_show_exactly_the_shipped_config() -> None:
    docs = (ROOT / "docs" / "openclaw.md").read_text()
    blocks = re.findall(r"```json5\n(.*?)```", docs, re.S)
    shipped = json5(CONFIG.read_text())
    assert any(block.lstrip().startswith("{\n  gateway") and json5(block) == shipped for block in blocks)


def test_gateway_image_is_node_24_with_the_pinned_openclaw() -> None:
    dockerfile = (OPENCLAW / "Dockerfile").read_text()
    assert re.search(r"^ARG NODE_IMAGE=node:24[-.]", dockerfile, re.M)
    assert f"ARG OPENCLAW_VERSION={pinned_version()}" in dockerfile
    assert "COPY openclaw.json5 /etc/openclaw/openclaw.json5" in dockerfile
    assert "OPENCLAW_CONFIG_PATH=/etc/openclaw/openclaw.json5" in dockerfile
    assert re.search(r"^USER node$", dockerfile, re.M)


def test_compose_gateway_service_is_wired_to_the_bridge() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    gateway, bridge = compose["services"]["openclaw"], compose["services"]["bridge"]
    assert gateway["profiles"] == ["openclaw"] and gateway["build"] == "./deploy/openclaw"
    assert (ROOT / gateway["build"] / "Dockerfile").is_file()
    assert "./deploy/openclaw/openclaw.json5:/etc/openclaw/openclaw.json5:ro" in gateway["volumes"]
    assert gateway["ports"] == ["127.0.0.1:18789:18789"]  # never beyond the host
    for name in ("OPENCLAW_GATEWAY_TOKEN", "DLQ_MODEL_BASE_URL", "DLQ_MODEL_ID"):
        assert name in gateway["environment"]
    assert bridge["environment"]["OPENCLAW_GATEWAY_TOKEN"] == "${OPENCLAW_GATEWAY_TOKEN:-}"
    toml = (ROOT / "deploy" / "compose" / "bridge.toml").read_text()
    commented = toml.split("# [openclaw]\n", 1)[1].split("\n\n", 1)[0]
    section = "[openclaw]\n" + "\n".join(line.removeprefix("# ") for line in commented.splitlines())
    settings = load_settings_text(section, {"OPENCLAW_GATEWAY_TOKEN": "t"})
    assert settings.openclaw is not None and settings.openclaw.url == "http://openclaw:18789"


def load_settings_text(text: str, environ: dict[str, str]) -> Any:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(text)
        f.flush()
        return load_settings(Path(f.name), environ)


def test_kubernetes_gateway_example_matches_the_bridge() -> None:
    docs = [d for d in yaml.safe_load_all((OPENCLAW / "gateway.yaml").read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"Deployment", "Service"}
    kustomization = yaml.safe_load((OPENCLAW / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["gateway.yaml"]
    assert kustomization["configMapGenerator"][0]["files"] == ["openclaw.json5"]
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    [box] = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in box["env"]}
    mounts = {m["name"]: m["mountPath"] for m in box["volumeMounts"]}
    assert env["OPENCLAW_CONFIG_PATH"] == mounts["config"] + "/openclaw.json5"
    assert env["OPENCLAW_STATE_DIR"] == mounts["state"]
    assert env["OPENCLAW_GATEWAY_TOKEN"] == {"secretKeyRef": {"name": "openclaw-gateway", "key": "token"}}
    assert box["securityContext"]["allowPrivilegeEscalation"] is False and pod["securityContext"]["runAsNonRoot"]
    service = kinds["Service"]
    [port] = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in box["ports"]}
    # the bridge's ConfigMap points at this Service in this namespace
    bridge_cm = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "configmap.yaml").read_text())
    toml = next(iter(bridge_cm["data"].values()))
    url = f"http://{service['metadata']['name']}.{kustomization['namespace']}.svc.cluster.local:{port['port']}"
    assert f'url = "{url}"' in toml


def docs_bridge_toml() -> str:
    docs = (ROOT / "docs" / "openclaw.md").read_text()
    blocks: list[str] = re.findall(r"```toml\n(.*?)```", docs, re.S)
    return next(b for b in blocks if b.startswith("[openclaw]"))


def test_docs_token_rules_match_the_behaviour() -> None:
    """docs/openclaw.md: the token is required by default; `token_env = ""` means no auth."""
    from bridge.core.errors import ConfigError

    toml = docs_bridge_toml()
    assert "REQUIRED by default" in toml and '# token_env = ""' in toml
    with pytest.raises(ConfigError, match="OPENCLAW_GATEWAY_TOKEN"):
        load_settings_text(toml, {})
    with_token = load_settings_text(toml, {"OPENCLAW_GATEWAY_TOKEN": "tok"}).openclaw
    assert with_token.token.get_secret_value() == "tok"
    no_auth = load_settings_text(toml.replace('# token_env = ""', 'token_env = ""'), {}).openclaw
    assert no_auth.token is None
    defaults = load_settings_text('[openclaw]\nurl = "http://127.0.0.1:18789"\n', {"OPENCLAW_GATEWAY_TOKEN": "t"})
    for key in ("timeout_s", "max_concurrency", "breaker_failures", "breaker_cooldown_s"):
        shown = re.search(rf"^{key} = (\S+)", toml, re.M)
        assert shown is not None and float(shown.group(1)) == getattr(defaults.openclaw, key), key
