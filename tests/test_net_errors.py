"""Error labels that are true (issue 34): refused, reset, DNS failure, TLS failure and timeout are told
apart, over both HTTP transports, the same way in a sink's error (the log, the console, `undeliverable
list`) and in `check`. Every case is a real local socket: a closed port, a peer that resets, a name
that cannot resolve, TLS spoken to a plain HTTP server, a server that never answers."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from bridge.clients.http import build_http_client, build_transport
from bridge.commands.check import probe
from bridge.config.sections import HttpSettings
from bridge.core.errors import SinkError
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.sinks.http_errors import post
from tests.conftest import envelope_entry
from tests.support.ops import cli
from tests.support.redis_server import free_port

LABELS = {"refused": "connection refused", "reset": "connection reset", "dns": "DNS failure",
          "tls": "TLS failure", "timeout": "timeout"}


class Peers:
    """One listening socket per misbehaviour, served by daemon threads until `close`."""

    def __init__(self) -> None:
        self._sockets: list[socket.socket] = []
        self._held: list[socket.socket] = []

    def serve(self, behaviour: str) -> int:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._sockets.append(listener)
        threading.Thread(target=self._loop, args=(listener, behaviour), daemon=True).start()
        return int(listener.getsockname()[1])

    def _loop(self, listener: socket.socket, behaviour: str) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if behaviour == "reset":
                conn.recv(1000)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            elif behaviour == "silent":
                self._held.append(conn)  # never answered; closed at the end
            else:  # plain HTTP: a TLS client fails its handshake here
                conn.recv(1000)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                conn.close()

    def close(self) -> None:
        for sock in self._sockets + self._held:
            sock.close()


@pytest.fixture
def targets() -> Iterator[dict[str, str]]:
    peers = Peers()
    try:
        yield {"refused": f"http://127.0.0.1:{free_port()}/", "reset": f"http://127.0.0.1:{peers.serve('reset')}/",
               "dns": "http://no-such-host.invalid/", "tls": f"https://127.0.0.1:{peers.serve('http')}/",
               "timeout": f"http://127.0.0.1:{peers.serve('silent')}/"}
    finally:
        peers.close()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_each_failure_has_its_own_label_in_a_sink_error_and_in_check(
    targets: dict[str, str], transport: str
) -> None:
    settings = HttpSettings(transport=transport)
    async with build_http_client(settings) as http, \
            httpx.AsyncClient(transport=build_transport(settings), timeout=0.5) as checking:
        for case, url in targets.items():
            with pytest.raises(SinkError) as raised:
                await post(http, "hook", "k", url, content=b"{}", headers={}, timeout_s=0.5)
            status, detail = await probe(checking, "HEAD", url)
            assert raised.value.detail.startswith(LABELS[case] + " ("), (transport, case, raised.value.detail)
            assert status == "FAIL" and detail.startswith(raised.value.detail + " after "), (transport, case, detail)
            assert "127.0.0.1" not in raised.value.detail and "invalid" not in raised.value.detail


async def test_a_webhook_on_a_closed_port_is_refused_in_send_test_undeliverable_list_and_check(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/in"
    settings = make_settings(sinks=[{"name": "hook", "type": "webhook", "url": closed, "secret": "s"}],
                             delivery={"max_attempts": 1, "base_delay_s": 0.01})
    await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
    async with open_runtime(settings) as runtime:
        await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
    config = tmp_path / "bridge.toml"
    sent, listed, checked = [await cli(config, *args) for args in (["send-test"], ["undeliverable", "list"],
                                                                    ["check"])]
    assert sent.code == 1 and "connection refused (" in sent.out + sent.err, sent
    (row,) = [line for line in listed.out.splitlines() if "hook" in line]
    assert "connection refused (ConnectionRefusedError)" in row and "Timeout" not in row, row
    (check_row,) = [line for line in checked.out.splitlines() if line.startswith("sink hook")]
    assert "connection refused (ConnectionRefusedError)" in check_row, check_row
