"""storage/postgres/worker.py: the thread that owns the PostgreSQL connection
(no server needed)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from storage.errors import StorageClosed
from storage.postgres.worker import WorkerThread


async def test_calls_run_on_one_thread_in_order_and_return_or_raise() -> None:
    worker = WorkerThread("storage-test")
    seen: list[tuple[int, str]] = []

    def job(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * 2

    def fails() -> None:
        raise ValueError("refused")

    try:
        assert await asyncio.gather(*(worker.call(job, n) for n in range(5))) == [0, 2, 4, 6, 8]
        with pytest.raises(ValueError, match="refused"):
            await worker.call(fails)
    finally:
        await worker.stop()
    assert seen == [(n, "storage-test") for n in range(5)]


async def test_a_cancelled_caller_leaves_its_job_to_finish_and_the_next_call_works() -> None:
    worker = WorkerThread("storage-test")
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def transaction() -> str:
        started.set()
        release.wait(10)
        finished.append("committed")
        return "done"

    try:
        caller = asyncio.create_task(worker.call(transaction))
        await asyncio.to_thread(started.wait, 10)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        release.set()
        assert await worker.call(lambda: "next") == "next"
        assert finished == ["committed"]  # ran to its end, before the next
    finally:
        release.set()
        await worker.stop()


async def test_stop_finishes_queued_jobs_and_then_refuses_calls() -> None:
    worker = WorkerThread("storage-test")
    entered, gate = threading.Event(), threading.Event()
    finished: list[int] = []

    def job(n: int) -> int:
        entered.set()
        gate.wait(10)
        finished.append(n)
        return n

    queued = [asyncio.create_task(worker.call(job, n)) for n in range(3)]
    await asyncio.to_thread(entered.wait, 10)  # the first runs; the others were queued first
    stopping = asyncio.create_task(worker.stop())
    gate.set()
    await stopping
    assert finished == [0, 1, 2]  # stop returned after the jobs handed over, not before
    assert [await q for q in queued] == [0, 1, 2]
    with pytest.raises(StorageClosed):
        await worker.call(lambda: None)
