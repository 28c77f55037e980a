"""The batcher behind batched hand-offs and cache reads: one round trip per window, one task per storm."""

from __future__ import annotations

import asyncio

import pytest

from bridge.clients.batching import Batcher

pytestmark = pytest.mark.asyncio


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, list[int]]] = []
        self.fail_on = fail_on

    async def run(self, key: str, items: list[int]) -> list[int]:
        self.calls.append((key, items))
        await asyncio.sleep(0)
        if key == self.fail_on:
            raise RuntimeError("redis said no")
        return [i * 10 for i in items]


async def test_calls_of_one_window_share_one_run_and_each_gets_its_answer() -> None:
    rec = Recorder()
    batcher: Batcher[str, int, int] = Batcher(rec.run, delay_s=0.01, linger_s=0.05)
    answers = await asyncio.gather(*(batcher.submit("a", i) for i in range(5)), batcher.submit("b", 7))
    assert answers == [0, 10, 20, 30, 40, 70]
    assert sorted(rec.calls) == [("a", [0, 1, 2, 3, 4]), ("b", [7])]


async def test_an_error_reaches_every_caller_of_its_batch_only() -> None:
    rec = Recorder(fail_on="bad")
    batcher: Batcher[str, int, int] = Batcher(rec.run, delay_s=0.01, linger_s=0.05)
    results = await asyncio.gather(batcher.submit("bad", 1), batcher.submit("bad", 2), batcher.submit("ok", 3),
                                   return_exceptions=True)
    assert [type(r) for r in results[:2]] == [RuntimeError, RuntimeError] and results[2] == 30


async def test_a_storm_of_batches_costs_one_task_per_key_not_one_per_batch() -> None:
    rec = Recorder()
    batcher: Batcher[str, int, int] = Batcher(rec.run, delay_s=0.001, max_items=4, linger_s=0.2)
    created: list[asyncio.Task[object]] = []
    loop = asyncio.get_running_loop()
    default = loop.get_task_factory()

    def counting(lp: asyncio.AbstractEventLoop, coro, **kw):  # type: ignore[no-untyped-def]
        task = asyncio.Task(coro, loop=lp, **kw)
        created.append(task)
        return task

    loop.set_task_factory(counting)
    try:
        for round_ in range(20):  # 20 windows in a row, 4 items each
            assert await asyncio.gather(*(batcher.submit("a", i) for i in range(4))) == [0, 10, 20, 30]
            assert len(rec.calls) == round_ + 1
    finally:
        loop.set_task_factory(default)
    gather_tasks = 20 * 4  # gather wraps each coroutine in a task of its own
    assert len(created) - gather_tasks == 1, "one runner served all 20 batches"


async def test_the_runner_leaves_when_idle_and_a_later_batch_starts_a_new_one() -> None:
    rec = Recorder()
    batcher: Batcher[str, int, int] = Batcher(rec.run, delay_s=0.001, linger_s=0.02)
    assert await batcher.submit("a", 1) == 10
    await asyncio.sleep(0.1)
    assert batcher._runners == {} and batcher._ready == {}  # nothing kept for a key gone quiet
    assert await batcher.submit("a", 2) == 20


async def test_a_cancelled_caller_leaves_its_item_in_the_batch() -> None:
    rec = Recorder()
    batcher: Batcher[str, int, int] = Batcher(rec.run, delay_s=0.02, linger_s=0.02)
    first = asyncio.ensure_future(batcher.submit("a", 1))
    second = asyncio.ensure_future(batcher.submit("a", 2))
    await asyncio.sleep(0.005)
    first.cancel()
    assert await second == 20
    assert rec.calls == [("a", [1, 2])]
