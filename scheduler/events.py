"""In-process handlers for `internal_event` jobs: `register(name, handler)`, then `emit`.

The composition root (and features such as memory maintenance) register
handlers before the scheduler starts. A job whose event has no handler fails
its run with a clear error; it never crashes the scheduler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["EventHandler", "EventRegistry", "InternalEvent", "UnknownEvent"]


class UnknownEvent(LookupError):
    """No handler is registered for the event a job emits."""


@dataclass(frozen=True, slots=True)
class InternalEvent:
    name: str
    job_id: str
    scheduled_at: datetime
    arguments: Mapping[str, Any] = field(default_factory=dict)  # the payload minus `event`


EventHandler = Callable[[InternalEvent], Awaitable[None]]


class EventRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, list[EventHandler]] = {}

    def register(self, event_name: str, handler: EventHandler) -> None:
        if not event_name:
            raise ValueError("event name must not be empty")
        self._handlers.setdefault(event_name, []).append(handler)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, event_name: object) -> bool:
        return event_name in self._handlers

    async def emit(self, event: InternalEvent) -> None:
        """Run every handler of `event.name` in registration order; the first failure raises."""
        handlers = self._handlers.get(event.name)
        if not handlers:
            raise UnknownEvent(f"no handler is registered for internal event {event.name!r}")
        for handler in handlers:
            await handler(event)
