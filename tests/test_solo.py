"""The intake gate of the solo lane: a suspect's intake runs with no other intake beside it."""

from __future__ import annotations

import asyncio

from bridge.drain.solo import IntakeGate


async def test_a_suspect_waits_for_running_intakes_and_holds_back_new_ones() -> None:
    gate, log = IntakeGate(), []
    release_first = asyncio.Event()

    async def shared(name: str, until: asyncio.Event | None = None) -> None:
        await gate.enter_shared()
        log.append(f"{name} in")
        try:
            if until is not None:
                await until.wait()
            await asyncio.sleep(0)
        finally:
            log.append(f"{name} out")
            gate.leave_shared()

    async def alone() -> None:
        async with gate.alone():
            log.append("suspect in")
            await asyncio.sleep(0.01)
            log.append("suspect out")

    first = asyncio.create_task(shared("a", release_first))
    await asyncio.sleep(0)
    suspect = asyncio.create_task(alone())
    await asyncio.sleep(0)
    later = asyncio.create_task(shared("b"))
    await asyncio.sleep(0.01)
    assert log == ["a in"], "the suspect waits for a; b waits behind the suspect"
    release_first.set()
    await asyncio.gather(first, suspect, later)
    assert log == ["a in", "a out", "suspect in", "suspect out", "b in", "b out"]
