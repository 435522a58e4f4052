"""The keyed work queue: de-duplication, one worker per key, delayed adds, per-key back-off."""

from __future__ import annotations

import asyncio

import pytest

from tfps_operator.reconcile import pacing
from tfps_operator.workqueue import ShutDown, WorkQueue


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def queue(clock: Clock | None = None) -> WorkQueue[str]:
    return WorkQueue(lambda n: pacing.retry_delay(n, 1.0, 8.0), clock or Clock())


async def take(q: WorkQueue[str], timeout: float = 0.05) -> str | None:
    try:
        return await asyncio.wait_for(q.get(), timeout)
    except TimeoutError:
        return None


def test_a_key_added_twice_is_queued_once():
    async def go() -> None:
        q = queue()
        q.add("a")
        q.add("b")
        q.add("a")
        assert len(q) == 2
        assert await take(q) == "a"
        assert await take(q) == "b"
        assert await take(q) is None

    asyncio.run(go())


def test_a_key_added_while_processed_is_handed_out_again_only_after_done():
    async def go() -> None:
        q = queue()
        q.add("a")
        assert await take(q) == "a"
        q.add("a")
        q.add("a")
        assert await take(q) is None  # its worker still has it: no second worker gets it
        q.done("a")
        assert await take(q) == "a"  # once, though added twice
        q.done("a")
        assert await take(q) is None

    asyncio.run(go())


def test_a_delayed_key_comes_when_due_and_the_earliest_delay_wins():
    async def go() -> None:
        clock = Clock()
        q = queue(clock)
        q.add_after("a", 10)
        q.add_after("a", 5)
        q.add_after("a", 30)  # later than the 5 s already set: ignored
        assert await take(q) is None
        clock.t += 5
        assert await take(q) == "a"
        q.done("a")
        clock.t += 100  # the superseded 10 s and 30 s entries never bring it back
        assert await take(q) is None
        assert q.delayed() == 0

    asyncio.run(go())


def test_an_immediate_add_overtakes_a_delay():
    async def go() -> None:
        clock = Clock()
        q = queue(clock)
        q.add_after("a", 60)
        q.add("a")
        assert await take(q) == "a"
        q.done("a")
        clock.t += 60
        assert await take(q) is None

    asyncio.run(go())


def test_a_waiting_worker_wakes_for_a_delay_that_falls_due_in_real_time():
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue(lambda n: 1.0)
        q.add_after("a", 0.05)
        assert await take(q, timeout=2) == "a"

    asyncio.run(go())


def test_failures_back_off_per_key_and_forget_resets_them():
    async def go() -> None:
        clock = Clock()
        q = queue(clock)
        assert [q.add_rate_limited("a") for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
        assert q.add_rate_limited("b") == 1.0  # another key has its own count
        q.forget("a")
        assert q.failures("a") == 0
        assert q.add_rate_limited("a") == 1.0

    asyncio.run(go())


def test_discard_drops_a_queued_and_a_delayed_key():
    async def go() -> None:
        clock = Clock()
        q = queue(clock)
        q.add("a")
        q.add_after("b", 1)
        q.add_rate_limited("b")
        q.discard("a")
        q.discard("b")
        clock.t += 10
        assert await take(q) is None
        assert q.failures("b") == 0

    asyncio.run(go())


def test_shut_down_stops_waiting_workers():
    async def go() -> None:
        q = queue()
        worker = asyncio.ensure_future(q.get())
        await asyncio.sleep(0)
        q.shut_down()
        with pytest.raises(ShutDown):
            await worker
        q.add("a")  # ignored once shut down
        assert len(q) == 0

    asyncio.run(go())


def test_a_pool_of_workers_never_processes_one_key_twice_at_once():
    async def go() -> None:
        q: WorkQueue[int] = WorkQueue(lambda n: 0.0)
        busy: set[int] = set()
        processed: list[int] = []

        async def worker() -> None:
            while True:
                try:
                    key = await q.get()
                except ShutDown:
                    return
                assert key not in busy
                busy.add(key)
                await asyncio.sleep(0.001)
                processed.append(key)
                busy.discard(key)
                q.done(key)

        workers = [asyncio.ensure_future(worker()) for _ in range(4)]
        for i in range(200):
            q.add(i % 5)
            if i % 7 == 0:
                await asyncio.sleep(0)
        while len(q) or len(busy):
            await asyncio.sleep(0.01)
        q.shut_down()
        await asyncio.gather(*workers)
        assert set(processed) == set(range(5))
        assert len(processed) < 200  # de-duplicated

    asyncio.run(go())
