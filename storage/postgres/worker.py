"""`WorkerThread`: the one thread that owns the PostgreSQL connection.

Each call hops once from the event loop to the thread and back: the caller
awaits a plain asyncio future that the thread resolves with
`call_soon_threadsafe`. `loop.run_in_executor` does the same through a
concurrent.futures future chained to an asyncio one, which costs twice the
CPU per hop (bench: real_sustained_postgres), and a write batch, a session
read and a delivery each make one.

A job already handed to the thread runs to its end even if its caller is
cancelled (a transaction is never cut in half); its result is then dropped.
`stop()` lets the queued jobs finish and ends the thread; a call after it
raises StorageClosed.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from storage.errors import StorageClosed

__all__ = ["WorkerThread"]

T = TypeVar("T")

_Job = tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]


class WorkerThread:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = self._stopped = False

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the thread; its result or its exception."""
        if self._stopped:
            raise StorageClosed("storage is closed")
        if not self._started:
            self._started = True
            self._thread.start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((future, fn, args))  # unbounded: callers are the bounded writer and reads
        return await future

    async def stop(self) -> None:
        """Finish the queued jobs, then end the thread (waited for off the loop)."""
        if self._stopped:
            return
        self._stopped = True
        if self._started:
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            loop = future.get_loop()
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller, whatever it is
                _resolve_soon(loop, future, None, exc)
            else:
                _resolve_soon(loop, future, result, None)


def _resolve_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(_resolve, future, result, exc)


def _resolve(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():  # the caller gave up; the job ran all the same
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)
