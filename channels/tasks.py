"""Cancel-and-await for the tasks a channel owns, without eating our own cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        raise asyncio.CancelledError
