"""Deployment files, validated without kubectl, docker or promtool.

Kubernetes: every document is a known kind with apiVersion/kind/metadata, and
the Deployment holds what operators rely on (2 replicas, consumer id from the
pod name, /healthz probes, resources, a grace period above the bridge's,
secrets by file, the ConfigMap's TOML loadable by the real settings loader).
Compose parses and points at files that exist. Prometheus rules and the
Grafana dashboard use only metric names that bridge/core/metrics.py defines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.core.metrics import Metrics
from bridge.settings import ServerSettings, load_settings

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
OBS = ROOT / "deploy" / "observability"

KNOWN_KINDS = {
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"), ("policy/v1", "PodDisruptionBudget"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}
CONTAINER_KEYS = {
    "name", "image", "imagePullPolicy", "command", "args", "ports", "env", "envFrom", "startupProbe",
    "readinessProbe", "livenessProbe", "resources", "securityContext", "volumeMounts", "lifecycle",
    "workingDir",
}
PROBE_KEYS = {"httpGet", "tcpSocket", "exec", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
              "failureThreshold", "successThreshold", "terminationGracePeriodSeconds"}
POD_SPEC_KEYS = {"serviceAccountName", "automountServiceAccountToken", "terminationGracePeriodSeconds",
                 "securityContext", "topologySpreadConstraints", "containers", "volumes", "affinity",
                 "nodeSelector", "tolerations", "priorityClassName", "initContainers"}
EXTERNAL_METRICS = {"up", "kube_pod_status_ready"}


def load_docs() -> dict[str, list[dict[str, Any]]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(K8S.glob("*.yaml"))}


@pytest.fixture(scope="module")
def docs() -> dict[str, list[dict[str, Any]]]:
    return load_docs()


def one(docs: dict[str, list[dict[str, Any]]], kind: str) -> dict[str, Any]:
    found = [d for ds in docs.values() for d in ds if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def pod_spec(docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    containers = pod_spec(docs)["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env_of(docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(docs)["env"]}


def test_every_document_is_a_known_kind(docs: dict[str, list[dict[str, Any]]]) -> None:
    assert docs, "no manifests"
    for name, documents in docs.items():
        for doc in documents:
            assert (doc.get("apiVersion"), doc.get("kind")) in KNOWN_KINDS, name
            if doc["kind"] != "Kustomization":
                assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"]), name
                assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "dlq-bridge", name


def test_kustomization_lists_existing_files(docs: dict[str, list[dict[str, Any]]]) -> None:
    kustomization = one(docs, "Kustomization")
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource
    assert "secret.example.yaml" not in kustomization["resources"]  # real secrets are created, not committed


def test_deployment_shape(docs: dict[str, list[dict[str, Any]]]) -> None:
    deployment = one(docs, "Deployment")
    spec, pod, box = deployment["spec"], pod_spec(docs), container(docs)
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert set(pod) <= POD_SPEC_KEYS and set(box) <= CONTAINER_KEYS
    assert pod["terminationGracePeriodSeconds"] > ServerSettings().grace_s + 5
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert box["securityContext"]["allowPrivilegeEscalation"] is False
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(box["resources"][kind])
    port_names = {p["name"]: p["containerPort"] for p in box["ports"]}
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/healthz"), ("startupProbe", "/livez")):
        assert set(box[probe]) <= PROBE_KEYS
        assert box[probe]["httpGet"]["path"] == path
        assert box[probe]["httpGet"]["port"] in port_names
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) in port_names.values()


def test_consumer_id_comes_from_the_pod_name(docs: dict[str, list[dict[str, Any]]]) -> None:
    env = env_of(docs)
    assert env["DLQ_BRIDGE_REDIS__CONSUMER_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["DLQ_BRIDGE_SERVER__HOST"] == "0.0.0.0"


def test_secrets_are_files_from_the_secret(docs: dict[str, list[dict[str, Any]]]) -> None:
    env, box, pod = env_of(docs), container(docs), pod_spec(docs)
    secret = one(docs, "Secret")
    volume = next(v for v in pod["volumes"] if "secret" in v)
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    mount = next(m for m in box["volumeMounts"] if m["name"] == volume["name"])
    files = {name: value for name, value in env.items() if name.endswith("_FILE")}
    expected = {"OPENCLAW_GATEWAY_TOKEN", "SLACK_WEBHOOK_URL", "PAGERDUTY_ROUTING_KEY",
                "INCIDENTS_WEBHOOK_SECRET", "REDIS_URL"}
    assert {name.removesuffix("_FILE") for name in files} == expected
    for path in files.values():
        directory, _, key = path.rpartition("/")
        assert directory == mount["mountPath"] and key in secret["stringData"]
    assert not any(name in env for name in expected), "secret values must not be inline env"


def test_configmap_toml_is_a_valid_config(docs: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    configmap, env, box, pod = one(docs, "ConfigMap"), env_of(docs), container(docs), pod_spec(docs)
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    mount = next(m for m in box["volumeMounts"] if m["name"] == volume["name"])
    [key] = configmap["data"]
    assert env["DLQ_BRIDGE_CONFIG"] == f"{mount['mountPath']}/{key}" == "/etc/dlq-bridge/bridge.toml"
    # Mount the example secret's values as files and load the TOML as the pod would.
    environ = {"DLQ_BRIDGE_REDIS__CONSUMER_ID": "dlq-bridge-7d9f-abcde"}
    for name, value in env.items():
        if name.endswith("_FILE"):
            path = tmp_path / value.rpartition("/")[2]
            path.write_text(one(docs, "Secret")["stringData"][path.name])
            environ[name] = str(path)
    config = tmp_path / key
    config.write_text(configmap["data"][key])
    settings = load_settings(config, environ)
    assert settings.redis.consumer_id == "dlq-bridge-7d9f-abcde"
    assert settings.redis.url is not None and settings.openclaw is not None
    assert {s.type for s in settings.sinks} == {"slack", "pagerduty", "webhook"}
    assert pod["terminationGracePeriodSeconds"] > settings.server.grace_s


def test_service_pdb_and_servicemonitor_select_the_pods(docs: dict[str, list[dict[str, Any]]]) -> None:
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service, pdb, monitor = one(docs, "Service"), one(docs, "PodDisruptionBudget"), one(docs, "ServiceMonitor")
    assert service["spec"]["selector"].items() <= labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] == 1 < one(docs, "Deployment")["spec"]["replicas"]
    port_names = {p["name"] for p in container(docs)["ports"]}
    [port] = service["spec"]["ports"]
    assert port["targetPort"] in port_names
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == port["name"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_compose_parses_and_mounts_existing_files() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"redis", "bridge", "producer", "openclaw"}
    bridge = services["bridge"]
    assert bridge["build"] == "." and bridge["depends_on"]["redis"]["condition"] == "service_healthy"
    seconds = int(bridge["stop_grace_period"].removesuffix("s"))
    assert seconds > ServerSettings().grace_s
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).is_file(), source
    config = bridge["environment"]["DLQ_BRIDGE_CONFIG"]
    assert any(v.split(":")[1] == config for v in bridge["volumes"])


def test_compose_config_loads(tmp_path: Path) -> None:
    settings = load_settings(ROOT / "deploy" / "compose" / "bridge.toml", {})
    assert settings.redis.url is not None
    assert settings.redis.url.get_secret_value() == "redis://redis:6379/0"
    assert [s.type for s in settings.effective_sinks()] == ["console"]


# ---- observability ------------------------------------------------------------

def exported_names() -> set[str]:
    """Every series name bridge/core/metrics.py can export (histogram/counter suffixes included)."""
    names = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names |= {family.name + "_total", family.name + "_created"}
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count", "_created")}
    return names


def metric_names(expr: str) -> set[str]:
    """Identifiers in a PromQL expression that are metric names (not functions, labels or keywords)."""
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    without_by = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", without_labels)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", without_by))
    keywords = {"and", "or", "unless", "bool", "offset", "le", "inf", "nan"}
    return {w for w in words if w not in keywords and not re.fullmatch(r"\d+[smhdwy]?", w)}


def test_metric_name_extraction() -> None:
    assert metric_names('max by (source) (deriv(dlq_bridge_dlq_depth[15m])) > 0 and up{job="x"} == 0') == {
        "dlq_bridge_dlq_depth", "up"}


def rule_list() -> list[dict[str, Any]]:
    doc = yaml.safe_load((OBS / "prometheus-rules.yaml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_prometheus_rules_use_real_metrics_and_runbooks() -> None:
    known, rules = exported_names(), rule_list()
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        used = metric_names(rule["expr"])
        assert used, rule["alert"]
        assert used <= known | EXTERNAL_METRICS, (rule["alert"], used - known)
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        runbook = rule["annotations"]["runbook_url"]
        assert (ROOT / runbook).is_file(), runbook
    alerts = {r["alert"] for r in rules}
    for needed in ("DLQDepthGrowing", "DLQBridgeUndeliverable", "DLQBridgeGatewayCircuitOpen", "DLQBridgeNotReady",
                   "DLQBridgeDown"):
        assert needed in alerts


def dashboard_exprs() -> list[str]:
    dash = json.loads((OBS / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def test_grafana_dashboard_uses_real_metrics_and_covers_the_bridge() -> None:
    known, exprs = exported_names(), dashboard_exprs()
    used: set[str] = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names <= known, (expr, names - known)
        used |= names
    for needed in ("dlq_bridge_dlq_depth", "dlq_bridge_deliveries_total", "dlq_bridge_summaries_total",
                   "dlq_bridge_delivery_attempts_total", "dlq_bridge_undeliverable_depth",
                   "dlq_bridge_delivery_seconds_bucket", "dlq_bridge_entry_seconds_bucket",
                   "dlq_bridge_gateway_circuit_open"):
        assert needed in used, needed
    dash = json.loads((OBS / "grafana-dashboard.json").read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_the_cluster_example_forms_six_nodes_and_its_bridges_use_them() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "redis-cluster" / "compose.yaml").read_text())
    services = compose["services"]
    nodes = {n: s["networks"]["cluster"]["ipv4_address"] for n, s in services.items() if n.startswith("redis-")}
    assert len(nodes) == 6
    create = services["cluster-init"]["command"][0]
    assert all(f"{ip}:7000" in create for ip in nodes.values()) and "--cluster-replicas 1" in create
    settings = load_settings(ROOT / "deploy" / "redis-cluster" / "bridge.toml", {})
    assert settings.redis.cluster and settings.redis.wait_replicas == 1
    assert settings.redis.url is not None and settings.redis.url.get_secret_value() == f"redis://{nodes['redis-1']}:7000"
    bridges = [s for name, s in services.items() if name.startswith("bridge-")]
    ids = {b["environment"]["DLQ_BRIDGE_REDIS__CONSUMER_ID"] for b in bridges}
    assert len(bridges) == 2 and len(ids) == 2, "each replica needs its own consumer_id"
