"""The source port's contract, the same for the `dead_letter:*` lists and every other kind.

Like saq's `TestQueue`, `PortContract` holds the tests and each subclass says how to produce dead
jobs and how to build the port (`bridge.sources.source.Source`); the kinds get it through
`tests/kinds/test_contract.py`'s `KindContract`, the lists through `TestRedisListPort` there. Every
test runs against a real Redis (and, for RabbitMQ and SQS, the real peer when installed):

- claim: entries land in this consumer's in-flight list, each with its receipt;
- finish: the one batched hand-off archives them out of that list, and only then is the record
  acknowledged (never claimed again);
- crash-recover and reap: a dead consumer's entries come back as suspects, the death held
  against the one it ran alone (a poison pill), never against the bystanders;
- depth, and quarantine: a copy kept in the quarantine list, the record acknowledged, the job
  system's own store unchanged.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis.asyncio as aioredis

from bridge.core import names
from bridge.core.claimed import Claimed
from bridge.sources.source import Source
from bridge.stores import keys
from bridge.stores.handoff import HandOff
from tests.support.receiver import make_alert

CLAIM_WAIT_S = 15.0  # a broker may hand out a just-published message a moment later under load


class PortContract:
    """Subclasses implement the hooks; `self.client()` gives a client on the test Redis."""

    def client(self) -> aioredis.Redis:
        raise NotImplementedError

    async def produce(self, count: int) -> list[str] | None:
        raise NotImplementedError

    async def port(self, consumer: str) -> Source:
        raise NotImplementedError

    async def port_after_crash(self, consumer: str, holder: Source) -> Source:
        """A port whose claims get what `holder` (now dead) held, once it was given back."""
        raise NotImplementedError

    def store_snapshot(self) -> Any:
        """The job system's own store, where the bridge must never write (None: not such a kind)."""
        return None

    # --- helpers ---------------------------------------------------------------------------
    async def claim(self, port: Source, count: int) -> list[Claimed]:
        await port.rescan()
        found: list[Claimed] = []
        deadline = time.monotonic() + CLAIM_WAIT_S
        while len(found) < count and time.monotonic() < deadline:
            batch = await port.claim_batch(count - len(found))
            found += batch
            if not batch:
                await asyncio.sleep(0.05)
        assert len(found) == count, f"claimed {len(found)} of {count}"
        return found

    def handoff(self, consumer: str) -> HandOff:
        return HandOff(self.client(), consumer, 100, {})

    async def inflight(self, claimed: Claimed, consumer: str) -> list[bytes]:
        key = claimed.inflight or keys.processing(claimed.source_key, consumer)
        return list(await self.client().lrange(names.encode(key), 0, -1))

    async def finish(self, port: Source, claimed: Claimed, *, quarantine: bool = False) -> None:
        alert = make_alert(job_id=f"j-{claimed.digest}", raw_digest=claimed.digest)
        assert await self.handoff(port.consumer).finish(claimed, alert, [], quarantine=quarantine)
        assert await port.acknowledge(claimed)

    # --- the contract ----------------------------------------------------------------------
    async def test_port_claims_into_the_in_flight_list_with_a_receipt(self) -> None:
        await self.produce(2)
        port = await self.port("c1")
        batch = await self.claim(port, 2)
        assert sorted(await self.inflight(batch[0], "c1")) == sorted(c.raw for c in batch)
        assert all(not c.suspect and c.claims == 0 for c in batch)

    async def test_port_finish_archives_then_acknowledges_and_nothing_comes_back(self) -> None:
        await self.produce(2)
        before = self.store_snapshot()
        port = await self.port("c1")
        for claimed in await self.claim(port, 2):
            await self.finish(port, claimed)
        assert await self.inflight(claimed, "c1") == []
        archived = await self.client().lrange(names.encode(keys.alerted(claimed.source_key)), 0, -1)
        assert len(archived) == 2
        assert await port.claim_batch(4) == []
        assert self.store_snapshot() == before

    async def test_port_crash_gives_back_bystanders_as_suspects_with_no_death(self) -> None:
        await self.produce(2)
        holder = await self.port("c1")
        await self.claim(holder, 2)
        again = await self.port_after_crash("c1", holder)
        assert await again.recover_own() == 2
        back = await self.claim(again, 2)
        assert all(c.suspect and c.claims == 0 for c in back), "a death is never held against every entry held"

    async def test_port_a_death_while_running_alone_counts_against_that_entry_only(self) -> None:
        await self.produce(2)
        holder = await self.port("c1")
        pill, bystander = await self.claim(holder, 2)
        await holder.run_alone(pill)
        again = await self.port_after_crash("c1", holder)
        assert await again.recover_own() == 2
        back = {c.raw: c for c in await self.claim(again, 2)}
        assert back[pill.raw].claims == 1 and back[bystander.raw].claims == 0

    async def test_port_reaps_a_consumer_whose_heartbeat_expired(self) -> None:
        await self.produce(1)
        dead = await self.port("dead")
        [held] = await self.claim(dead, 1)
        alive = await self.port_after_crash("alive", dead)
        await alive.heartbeat()
        assert await alive.reap() == 1
        assert await self.inflight(held, "dead") == []
        [back] = await self.claim(alive, 1)
        assert back.raw == held.raw and back.suspect and back.claims == 1, "it was the only entry held"

    async def test_port_depth_counts_what_waits(self) -> None:
        await self.produce(2)
        port = await self.port("c1")
        await port.rescan()
        assert sum((await port.depths()).values()) == 2

    async def test_port_quarantine_keeps_a_copy_and_acknowledges(self) -> None:
        await self.produce(1)
        before = self.store_snapshot()
        port = await self.port("c1")
        [claimed] = await self.claim(port, 1)
        await self.finish(port, claimed, quarantine=True)
        kept = await self.client().lrange(names.encode(keys.quarantine(claimed.source_key)), 0, -1)
        assert kept == [claimed.raw]
        assert await self.inflight(claimed, "c1") == []
        await asyncio.sleep(0)
        assert await port.claim_batch(2) == []
        assert self.store_snapshot() == before
