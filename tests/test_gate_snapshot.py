"""`read_gate`: the console's read-only view of the fleet-wide gateway gate (breaker, pause, budget)."""

from __future__ import annotations

import redis.asyncio as aioredis

from bridge.settings import OpenClawSettings
from bridge.stores.gateway_gate import FleetGate, GateSnapshot, read_gate


async def test_the_console_reads_the_fleet_gate_as_the_replicas_left_it(aredis: aioredis.Redis) -> None:
    settings = OpenClawSettings(url="http://gateway.test:18789", calls_per_minute=10, breaker_failures=2)
    gate = FleetGate(aredis, settings)
    for _ in range(3):
        await gate.admit()
    assert await read_gate(aredis, settings) == GateSnapshot("closed", 0.0, 0, 7)
    assert await read_gate(aredis, settings) == GateSnapshot("closed", 0.0, 0, 7), "reading spends nothing"
    await gate.failure()
    await gate.failure()
    opened = await read_gate(aredis, settings)
    assert (opened.state, opened.failures) == ("open", 2)
    await gate.pause(30)
    paused = await read_gate(aredis, settings)
    assert paused.state == "paused" and 29.0 < paused.paused_s <= 30.0
