"""One lifecycle for the gateway's long-running parts, and one readiness.

Every part (the HTTP server, each channel, the outbound senders, sessions,
compaction, command lanes, the inbound processor, the scheduler) is a
`Service`: `start(tg)` returns once the part is ready (its tasks run in the
root's TaskGroup), `stop()` ends it. `start_services` starts them in order on
an `AsyncExitStack`, so they stop in reverse order when the stack unwinds —
also when a later one fails to start, which raises `StartupError` naming it.

`Readiness` is the one place `/ready` reads: named probes, each saying why
its part is not ready (or None). `ShutdownBudget` shares
`gateway.shutdown_timeout_secs` among the parts: those that wait for work
(turns, the inbox, the outbox) may use it less a closing reserve, kept for
the parts that stop after them (channels' connections, MCP servers, the HTTP
server); and every part's stop is cut at the budget's end, so the whole stop
is bounded whatever a client or a child process does. `root_task_group`
then cancels what a part cut short left running, rather than waiting for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Final, Protocol

import structlog

__all__ = [
    "Readiness",
    "Service",
    "ShutdownBudget",
    "Stage",
    "StartupError",
    "cancel_and_wait",
    "root_task_group",
    "start_services",
]

log = structlog.get_logger(__name__)

CLOSING_RESERVE_MAX_SECS: Final = 5.0  # of the budget, kept for closing (a third at most)


class StartupError(Exception):
    """A part of the gateway failed to start; the message names it."""


class Service(Protocol):
    @property
    def name(self) -> str: ...

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Start; return once ready. Tasks go into `tg`."""
        ...

    async def stop(self) -> None:
        """Stop what `start` began; safe to call after a failed start."""
        ...


async def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Stage:
    """A `Service` made of two functions, for parts whose own API differs."""

    name: str
    start_fn: Callable[[asyncio.TaskGroup], Awaitable[None]]
    stop_fn: Callable[[], Awaitable[None]] = _nothing

    async def start(self, tg: asyncio.TaskGroup) -> None:
        await self.start_fn(tg)

    async def stop(self) -> None:
        await self.stop_fn()


async def _stop(service: Service, budget: ShutdownBudget | None) -> None:
    """Stop `service`; with a `budget`, cut the stop at its end (a part cut
    short leaves its tasks to `root_task_group`, which cancels them)."""
    limit = None if budget is None else budget.left_to_close()
    try:
        async with asyncio.timeout(limit):
            await service.stop()
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        log.warning("service_stop_cut", service=service.name, after_secs=round(limit or 0, 2))
    except Exception:  # one part failing to stop must not keep the rest running
        log.exception("service_stop_failed", service=service.name)


async def start_services(
    stack: AsyncExitStack,
    tg: asyncio.TaskGroup,
    services: Sequence[Service],
    budget: ShutdownBudget | None = None,
) -> None:
    """Start `services` in order; each one's stop is pushed on `stack` once it
    has started, bounded by `budget` when given. A failed start stops that
    part, then raises StartupError."""
    for service in services:
        log.debug("service_starting", service=service.name)
        try:
            await service.start(tg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("service_start_failed", service=service.name)
            await _stop(service, budget)
            raise StartupError(
                f"{service.name} failed to start: {type(exc).__name__}: {exc}"
            ) from exc
        stack.push_async_callback(_stop, service, budget)


class _PartsStopped(Exception):
    """Raised in the root TaskGroup once every part has stopped."""


@asynccontextmanager
async def root_task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """The composition root's TaskGroup. When its body ends, a task still
    running in it (left by a part whose stop was cut) is cancelled, not
    waited for: a plain TaskGroup would wait for it without end."""
    try:
        async with asyncio.TaskGroup() as tg:
            yield tg
            raise _PartsStopped  # an error in the body is how a TaskGroup cancels the rest
    except* _PartsStopped:
        pass


Probe = Callable[[], str | None]


class Readiness:
    def __init__(self) -> None:
        self._probes: list[tuple[str, Probe]] = []

    def add(self, name: str, probe: Probe) -> None:
        self._probes.append((name, probe))

    def checks(self) -> list[tuple[str, str | None]]:
        """Every probe by name with its reason (None: ready), for the operator page."""
        return [(name, probe()) for name, probe in self._probes]

    def reasons(self) -> list[str]:
        """Why the gateway is not ready; empty when it is."""
        found = []
        for name, probe in self._probes:
            reason = probe()
            if reason is not None:
                found.append(f"{name}: {reason}")
        return found


class ShutdownBudget:
    """The time the whole shutdown may take, counted from `begin()`.

    `reserve_secs` (by default a third of it, at most 5 s) is the end of it
    that `left()` keeps back: parts that wait for work (turns finishing, the
    inbox draining, the outbox flushing) stop waiting that much before the
    end, so the parts that stop after them still have time to close their
    connections and processes. `left_to_close()` counts to the end itself.
    """

    def __init__(self, total_secs: float, *, reserve_secs: float | None = None) -> None:
        if reserve_secs is None:
            reserve_secs = min(CLOSING_RESERVE_MAX_SECS, total_secs / 3)
        if not 0 <= reserve_secs <= total_secs:
            raise ValueError(f"reserve_secs must be within 0..{total_secs}, not {reserve_secs}")
        self.total_secs = total_secs
        self.reserve_secs = reserve_secs
        self._deadline: float | None = None

    def begin(self) -> None:
        if self._deadline is None:
            self._deadline = time.monotonic() + self.total_secs

    def left(self, at_least: float = 0.1) -> float:
        """Seconds a part may still wait for work: what is left less the
        reserve (the budget less the reserve before `begin`), never below `at_least`."""
        return max(at_least, self.left_to_close(0.0) - self.reserve_secs)

    def left_to_close(self, at_least: float = 0.1) -> float:
        """Seconds until the whole stop must be over (the whole budget before
        `begin`), never below `at_least`: what each part's stop is cut at."""
        if self._deadline is None:
            return max(at_least, self.total_secs)
        return max(at_least, self._deadline - time.monotonic())


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait until each has ended."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with suppress(asyncio.CancelledError):
            await task
