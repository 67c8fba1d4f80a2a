"""A channel for tests: records what the gateway sends and fails on command.

It speaks no platform protocol; it sits where a platform adapter would, so the
gateway's real dispatcher, outbox and retry policy are what the tests exercise.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from channels.base import (
    Capabilities,
    Channel,
    ChannelRuntime,
    PermanentSendError,
    RateLimited,
    SendResult,
    TransientSendError,
)
from gateway.bus import ChannelEvent, InboundMessage, OutboundMessage, Receipt


@dataclass(frozen=True, slots=True)
class Sent:
    message: OutboundMessage
    at: float  # loop time


class RecordingChannel(Channel):
    __test__ = False

    def __init__(self, name: str = "rec", *, send_delay: float = 0.0) -> None:
        super().__init__()
        self.name = name
        self.capabilities = Capabilities(max_message_chars=4000, can_show_typing=True)
        self.sent: list[Sent] = []
        self.events: list[ChannelEvent] = []
        self.attempts: list[OutboundMessage] = []
        self.send_delay = send_delay
        self._failures: deque[Exception] = deque()
        self.fail_forever: Exception | None = None
        self._changed = asyncio.Condition()
        self.runtime: ChannelRuntime | None = None
        self._n = 0

    # -- scripting -------------------------------------------------------------
    def fail_next(self, *errors: Exception) -> None:
        self._failures.extend(errors)

    def rate_limit_next(self, retry_after: float, times: int = 1) -> None:
        self.fail_next(*(RateLimited("slow down", retry_after) for _ in range(times)))

    def fail_transient(self, times: int) -> None:
        self.fail_next(*(TransientSendError("network hiccup") for _ in range(times)))

    def fail_permanently(self) -> None:
        self.fail_forever = PermanentSendError("bot was blocked by the user")

    async def submit(
        self, chat_id: str, text: str, message_id: str | None = None, **fields: object
    ) -> Receipt:
        """Inject an inbound message as a platform event would arrive."""
        assert self.runtime is not None, "setup() not called yet"
        self._n += 1
        message = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=str(fields.pop("sender_id", f"user-{chat_id}")),
            text=text,
            message_id=message_id or f"{chat_id}-{self._n}",
            **fields,  # type: ignore[arg-type]
        )
        return await self.runtime.bus.submit(message)

    async def wait_sent(self, count: int, timeout: float = 10.0) -> list[Sent]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.sent) >= count)
        return self.sent

    async def wait_attempts(self, count: int, timeout: float = 10.0) -> list[OutboundMessage]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.attempts) >= count)
        return self.attempts

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [
            s.message.text for s in self.sent if chat_id is None or s.message.chat_id == chat_id
        ]

    # -- Channel ----------------------------------------------------------------
    def setup(self, runtime: ChannelRuntime) -> None:
        self.runtime = runtime

    async def start(self) -> None:
        self.not_ready_reason = None

    async def stop(self) -> None:
        self.not_ready_reason = "stopped"

    async def send(self, message: OutboundMessage) -> SendResult:
        async with self._changed:
            self.attempts.append(message)
            self._changed.notify_all()
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if self.fail_forever is not None:
            raise self.fail_forever
        if self._failures:
            raise self._failures.popleft()
        async with self._changed:
            self.sent.append(Sent(message, asyncio.get_running_loop().time()))
            self._changed.notify_all()
        return SendResult((str(message.outbox_id),))

    async def notify(self, event: ChannelEvent) -> None:
        self.events.append(event)
