"""The runtime half of the sink contract: through the real runtime to a real local peer.

`tests/sinks/test_sink_contract.py` checks a sink on its own (render, one send, error mapping); this
checks it inside the bridge. Subclass `RuntimeContract` once per sink type with a `peer` fixture (a
`ContractPeer`): the class then checks, with the peer's own view of what arrived, that one dead
letter is delivered once (a replay of the same entry is not sent again), that a retryable answer is
retried and a permanent one lands in the undeliverable records without a secret, that `send-test`
reaches it marked as a test, that `check` probes it (and fails on a dead port), that the console
shows its state, and that a rendered body holds no secret.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

import httpx
import pytest
import redis.asyncio as aioredis

from bridge.app import build_console
from bridge.commands.check import check_all
from bridge.commands.send_test import send_test
from bridge.core.models import Severity
from bridge.runtime import open_runtime
from bridge.settings import Settings
from bridge.sinks.sink_plugin import SinkContext
from bridge.sinks.sink_registry import SINKS
from bridge.stores.undeliverable_records import UndeliverableStore
from tests.conftest import envelope_entry
from tests.support.receiver import make_alert
from tests.support.redis_server import free_port

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 5.0, "max_attempts": 3}
Failure = Literal["retryable", "permanent"]


class ContractPeer(Protocol):
    secrets: list[str]  # what must never show in a record, an error or a rendered body
    scripted_failures: bool  # False: the peer cannot be told to fail (the failure tests skip, saying why)

    def table(self, **extra: Any) -> dict[str, Any]:
        """The `[[sinks]]` table that reaches this peer."""
        ...

    async def received(self) -> list[str]:
        """One text per notification the peer took (a body, a mail, an alert it holds)."""
        ...

    def fail_next(self, failure: Failure) -> None:
        """Answer the next request as a retryable (4xx SMTP, 429/503) or permanent refusal."""
        ...


class RuntimeContract:
    type_name: ClassVar[str]
    settle_s: ClassVar[float] = 0.0  # how long the peer takes to show what it took (Alertmanager: its group_wait)

    async def deliver(self, settings: Settings, aredis: aioredis.Redis, *jobs: str) -> None:
        for job in jobs:
            await aredis.lpush("dead_letter:orders", envelope_entry(job_id=job))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)

    async def seen(self, peer: ContractPeer, job: str, want: int = 1, timeout_s: float = 15.0) -> int:
        deadline = asyncio.get_running_loop().time() + timeout_s
        count = sum(job in text for text in await peer.received())
        while count < want and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
            count = sum(job in text for text in await peer.received())
        return count

    def settings_for(self, make_settings: Callable[..., Settings], peer: ContractPeer) -> Settings:
        return make_settings(delivery=FAST, sinks=[peer.table(group_by="none")])

    def test_the_type_is_a_registered_plug_in(self) -> None:
        assert self.type_name in SINKS.types()

    async def test_one_dead_letter_is_delivered_once_even_when_its_entry_comes_again(
        self, peer: ContractPeer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
    ) -> None:
        settings = self.settings_for(make_settings, peer)
        await self.deliver(settings, aredis, "contract-once")
        await self.deliver(settings, aredis, "contract-once")  # the same raw entry: the ledger knows it
        await asyncio.sleep(self.settle_s)
        assert await self.seen(peer, "contract-once") == 1

    async def test_a_retryable_refusal_is_retried_and_delivered(
        self, peer: ContractPeer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
    ) -> None:
        if not peer.scripted_failures:
            pytest.skip(f"a real {self.type_name} cannot be told to refuse; its error mapping has its own tests")
        peer.fail_next("retryable")
        await self.deliver(self.settings_for(make_settings, peer), aredis, "contract-retry")
        assert await self.seen(peer, "contract-retry") == 1
        assert await UndeliverableStore(aredis).records() == []

    async def test_a_permanent_refusal_is_undeliverable_and_its_record_has_no_secret(
        self, peer: ContractPeer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
    ) -> None:
        if not peer.scripted_failures:
            pytest.skip(f"a real {self.type_name} cannot be told to refuse; its error mapping has its own tests")
        peer.fail_next("permanent")
        await self.deliver(self.settings_for(make_settings, peer), aredis, "contract-refused")
        [stored] = await UndeliverableStore(aredis).records()
        assert stored.record["sink_type"] == self.type_name and stored.record["error"]
        assert not any(secret in stored.raw for secret in peer.secrets)
        assert await self.seen(peer, "contract-refused", timeout_s=0.5) == 0

    async def test_send_test_reaches_it_marked_as_a_test(
        self, peer: ContractPeer, make_settings: Callable[..., Settings]
    ) -> None:
        out = io.StringIO()
        code = await send_test(self.settings_for(make_settings, peer), None, Severity.INFO, out)
        assert code == 0, out.getvalue()
        assert await self.seen(peer, "send-test-") == 1
        assert not any(secret in out.getvalue() for secret in peer.secrets)

    async def test_check_probes_it_and_fails_on_a_dead_port(
        self, peer: ContractPeer, make_settings: Callable[..., Settings]
    ) -> None:
        [row] = [r for r in await check_all(self.settings_for(make_settings, peer), 5.0)
                 if r.component.startswith("sink ")]
        assert row.status == "ok", row
        dead = dict(peer.table(group_by="none"))
        for key in ("url", "port"):
            if key in dead:
                dead[key] = free_port() if key == "port" else f"http://127.0.0.1:{free_port()}/x"
        [down] = [r for r in await check_all(make_settings(sinks=[dead]), 2.0) if r.component.startswith("sink ")]
        assert down.status == "FAIL", down
        shown = f"{row} {down}"
        assert not any(secret in shown for secret in peer.secrets)
        assert await self.seen(peer, "send-test-", want=0, timeout_s=0) == 0, "check sends nothing"

    async def test_the_console_shows_its_state_after_a_delivery(
        self, peer: ContractPeer, make_settings: Callable[..., Settings], aredis: aioredis.Redis
    ) -> None:
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="contract-console"))
        async with open_runtime(self.settings_for(make_settings, peer)) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 60)
            overview = await build_console(runtime).service.overview()
        [row] = overview.sinks
        assert (row.type, row.health, row.queue_depth, row.undeliverable) == (self.type_name, "ok", 0, 0), row
        assert await self.seen(peer, "contract-console") == 1

    async def test_a_rendered_body_holds_no_secret(
        self, peer: ContractPeer, make_settings: Callable[..., Settings]
    ) -> None:
        table = self.settings_for(make_settings, peer).sinks[0]
        async with httpx.AsyncClient() as http:
            sink = SINKS.of(table).build(table, SinkContext(http, 5.0, "contract"))
            shown = repr(sink.render(make_alert())) + repr(sink.render(make_alert(is_test=True)))
        assert not any(secret in shown for secret in peer.secrets)

