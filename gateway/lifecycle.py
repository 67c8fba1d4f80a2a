"""One lifecycle for the gateway's long-running parts, and one readiness.

Every part (the HTTP server, each channel, the outbound senders, sessions,
compaction, command lanes, the inbound processor, the scheduler) is a
`Service`: `start(tg)` returns once the part is ready (its tasks run in the
root's TaskGroup), `stop()` ends it. `start_services` starts them in order on
an `AsyncExitStack`, so they stop in reverse order when the stack unwinds —
also when a later one fails to start, which raises `StartupError` naming it.

`Readiness` is the one place `/ready` reads: named probes, each saying why
its part is not ready (or None). `ShutdownBudget` shares
`gateway.shutdown_timeout_secs` among the parts that wait while stopping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from typing import Protocol

import structlog

__all__ = [
    "Readiness",
    "Service",
    "ShutdownBudget",
    "Stage",
    "StartupError",
    "cancel_and_wait",
    "start_services",
]

log = structlog.get_logger(__name__)


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


async def _stop(service: Service) -> None:
    try:
        await service.stop()
    except asyncio.CancelledError:
        raise
    except Exception:  # one part failing to stop must not keep the rest running
        log.exception("service_stop_failed", service=service.name)


async def start_services(
    stack: AsyncExitStack, tg: asyncio.TaskGroup, services: Sequence[Service]
) -> None:
    """Start `services` in order; each one's stop is pushed on `stack` once it
    has started. A failed start stops that part, then raises StartupError."""
    for service in services:
        log.debug("service_starting", service=service.name)
        try:
            await service.start(tg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("service_start_failed", service=service.name)
            await _stop(service)
            raise StartupError(
                f"{service.name} failed to start: {type(exc).__name__}: {exc}"
            ) from exc
        stack.push_async_callback(_stop, service)


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
    """The time the whole shutdown may take, counted from `begin()`."""

    def __init__(self, total_secs: float) -> None:
        self.total_secs = total_secs
        self._deadline: float | None = None

    def begin(self) -> None:
        if self._deadline is None:
            self._deadline = time.monotonic() + self.total_secs

    def left(self, at_least: float = 0.1) -> float:
        """Seconds left (the whole budget before `begin`), never below `at_least`."""
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
