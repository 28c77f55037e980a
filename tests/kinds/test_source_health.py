"""A kind source that cannot be read shows on /healthz (503, `source:<name>` failing with a short
reason, no secret) and in `dlq_bridge_source_up`, while /livez stays 200; back to ok when the
broker is back. Real brokers, really down: a Redis stopped and started on its port, a Redis with
a password given the wrong one, RabbitMQ behind a TCP relay that is cut, a moto SQS server stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bridge.clients.embedded import EmbeddedRedis, redis_server_binary
from tests.kinds import producers
from tests.kinds.test_service import stop
from tests.support.bridge_process import start_bridge
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow

WAIT_S = 60.0
SECRET = "pw-d0nt-l3ak"


class Service:
    """One `dlq-bridge run` with the given source tables; its /healthz, /livez and /metrics."""

    def __init__(self, tmp: Path, redis_url: str, tables: list[tuple[str, dict[str, Any]]],
                 env: dict[str, str]) -> None:
        self.port = free_port()
        lines = ["[server]", f"port = {self.port}", "grace_s = 5", "[redis]", f"url = {json.dumps(redis_url)}",
                 'consumer_id = "health-1"', "[sources]", 'match = ""', "rescan_interval_s = 0.5"]
        for kind, table in tables:
            lines += [f"[[sources.{kind}]]", *(f"{k} = {json.dumps(v)}" for k, v in table.items())]
        path = tmp / "health.toml"
        path.write_text("\n".join(lines) + "\n")
        self.proc = start_bridge(["--config", str(path), "run"], env=env)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=3)

    def healthz(self) -> tuple[int, dict[str, Any]]:
        response = self.get("/healthz")
        return response.status_code, response.json()

    def up(self, source: str) -> float | None:
        series = f'dlq_bridge_source_up{{source="{source}"}} '
        for line in self.get("/metrics").text.splitlines():
            if line.startswith(series):
                return float(line[len(series):])
        return None

    async def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ""
                raise AssertionError(f"bridge exited: {err}")
            with contextlib.suppress(httpx.HTTPError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; /healthz: {self.healthz()}")
            await asyncio.sleep(0.2)

    def check_of(self, source: str) -> dict[str, str]:
        return dict(self.healthz()[1]["checks"].get(f"source:{source}", {}))


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[list[Service]]:
    made: list[Service] = []
    yield made
    for service in made:
        stop(service.proc)


async def failing_then_ok(
    service: Service, source: str, reasons: tuple[str, ...], bring_back: Callable[[], Awaitable[object]]
) -> None:
    """The source shows failing (503) for one of `reasons`, /livez stays 200; after `bring_back`, all is ok."""
    await service.until(lambda: service.check_of(source).get("status") == "failing", f"{source} failing")
    status, body = service.healthz()
    assert status == 503 and body["status"] == "failing"
    detail = body["checks"][f"source:{source}"]["detail"]
    assert any(reason in detail for reason in reasons), detail
    assert SECRET not in json.dumps(body) and "://" not in json.dumps(body), "no secret, no URL"
    assert service.get("/livez").status_code == 200, "liveness: a restart would not bring the broker back"
    assert service.up(source) == 0.0
    await bring_back()
    await service.until(lambda: service.healthz()[0] == 200, f"{source} back")
    assert service.check_of(source)["status"] == "ok"
    assert service.up(source) == 1.0


async def test_a_job_systems_redis_refusing_then_back(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path, services: list[Service]
) -> None:
    port = free_port()  # nothing listens here yet
    env = {"SIDEKIQ_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    service = Service(tmp_path, redis_url, [("sidekiq", {"redis_url_env": "SIDEKIQ_REDIS_URL"}),
                                            ("rq", {"queues": ["billing"]})], env)
    services.append(service)
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="dlqb-sidekiq-")), port, appendonly=False)
    try:
        await failing_then_ok(service, "sidekiq", ("connection refused",), lambda: asyncio.to_thread(server.start))
        assert service.check_of("rq")["status"] == "ok", "the other source was read all along"
        await asyncio.to_thread(server.stop)
        await service.until(lambda: service.check_of("sidekiq").get("status") == "failing", "down again")
    finally:
        server.stop()


async def test_wrong_credentials_say_so_without_the_password(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path, services: list[Service]
) -> None:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="dlqb-auth-"))
    server = subprocess.Popen([redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                               "--save", "", "--appendonly", "no", "--requirepass", "right-one"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = {"BULL_REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{port}/0"}
        service = Service(tmp_path, redis_url, [("bullmq", {"redis_url_env": "BULL_REDIS_URL", "queues": ["q"]})], env)
        services.append(service)
        await service.until(lambda: service.check_of("bullmq.bull").get("status") == "failing", "failing")
        status, body = service.healthz()
        assert status == 503
        assert "authentication failed" in body["checks"]["source:bullmq.bull"]["detail"]
        assert SECRET not in json.dumps(body) and SECRET not in service.get("/metrics").text
    finally:
        server.terminate()
        server.wait(timeout=10)


class Relay:
    """A TCP relay to a real broker that can be cut (listener closed, every connection dropped) and restored."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.port = free_port()
        self._target = target
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers |= {writer, up_writer}

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._writers -= {writer, up_writer}


async def test_rabbitmq_cut_off_then_back(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path, services: list[Service]
) -> None:
    reason = producers.rabbitmq_missing()
    if reason:
        pytest.skip(reason)
    names = producers.CeleryNames.fresh()
    producers.declare_celery(names)
    relay = Relay(("127.0.0.1", 5672))
    try:
        env = {"RABBITMQ_URL": f"amqp://guest:guest@127.0.0.1:{relay.port}/"}
        service = Service(tmp_path, redis_url, [("rabbitmq", {"queue": names.dlq, "name": "amqp"})], env)
        services.append(service)
        await failing_then_ok(service, "amqp", ("connection refused", "cannot connect"), relay.open)
        await relay.cut()  # the broker goes away under an open connection
        await failing_then_ok(service, "amqp", ("connection refused", "cannot connect", "unavailable"), relay.open)
    finally:
        await relay.cut()
        producers.delete_celery(names)


async def test_sqs_endpoint_stopped_then_back(
    redis_url: str, clean_redis: redis.Redis, tmp_path: Path, services: list[Service]
) -> None:
    reason = producers.sqs_missing()
    if reason:
        pytest.skip(reason)
    from moto.server import ThreadedMotoServer

    port = free_port()

    def moto_with_queue() -> ThreadedMotoServer:
        import boto3

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        client = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                              aws_access_key_id="test", aws_secret_access_key="test")
        client.create_queue(QueueName="orders-dlq")
        return server

    server = moto_with_queue()
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
    table = {"queue_url": f"http://127.0.0.1:{port}/123456789012/orders-dlq", "endpoint_url": f"http://127.0.0.1:{port}"}
    service = Service(tmp_path, redis_url, [("sqs", table)], env)
    services.append(service)
    try:
        await service.until(lambda: service.healthz()[0] == 200 and service.up("sqs.orders-dlq") == 1.0, "readable")
        await asyncio.to_thread(server.stop)
        holder: list[ThreadedMotoServer] = []

        async def back() -> None:
            holder.append(await asyncio.to_thread(moto_with_queue))

        await failing_then_ok(service, "sqs.orders-dlq", ("connection refused", "cannot connect"), back)
        server = holder[0]
    finally:
        server.stop()
