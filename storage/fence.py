"""The fence a turn's writes carry (docs/scale-out.md, storage/sql/cluster.py).

While a worker runs a chat's turn it sets `CURRENT` to the chat lease it holds
(`fenced`); every `Database.write` made in that context (the turn's messages,
its reply, its charges, whatever tasks it started) first checks in its own
transaction that the lease is still this worker's with the same token, and
raises FenceLost otherwise. Outside a fenced context nothing is checked: a
single gateway never sets one.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from storage.sql.cluster import check_fence

__all__ = ["CURRENT", "Fence", "fenced", "guarded"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Fence:
    key: str  # chat:<channel>:<chat_id>
    owner: str  # the worker id
    token: int


CURRENT: ContextVar[Fence | None] = ContextVar("picobot_fence", default=None)


@contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    reset = CURRENT.set(fence)
    try:
        yield
    finally:
        CURRENT.reset(reset)


def guarded(fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
    """`fn`, checked against the current fence first (if there is one)."""
    fence = CURRENT.get()
    if fence is None:
        return fn
    return functools.partial(_checked, fence, fn)


def _checked(fence: Fence, fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    check_fence(conn, fence.key, fence.owner, fence.token)
    return fn(conn)
