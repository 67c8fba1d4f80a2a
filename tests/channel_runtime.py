"""A stand-in ChannelRuntime for adapter-level tests.

Real MessageBus, real aiohttp app (on 127.0.0.1 port 0) for webhook routes, an
in-memory StateStore, and a consumer that records every submitted message and
resolves its receipt like the gateway does (duplicates by (channel, message_id)).
End-to-end tests use the real gateway instead (tests/support.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from aiohttp import web

from channels.base import Channel, Handler
from gateway.bus import InboundMessage, MessageBus, Receipt


class MemoryState:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def set(self, key: str, value: str) -> None:
        self.values[key] = value


class AppMount:
    def __init__(self, app: web.Application) -> None:
        self.app = app

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        self.app.router.add_route(method, path, handler)


class TestRuntime:
    __test__ = False  # not a pytest class

    def __init__(self, media_dir: Path) -> None:
        self.bus = MessageBus(inbound_capacity=64)
        self.state = MemoryState()
        self.app = web.Application()
        self.http = AppMount(self.app)
        self.media_dir = media_dir
        self.received: list[InboundMessage] = []
        self.online: list[str] = []
        self.secrets: list[str] = []
        self.dead_letters: list[tuple[str | None, str | bytes, str]] = []
        self._seen: set[tuple[str, str]] = set()
        self._arrived = asyncio.Condition()
        self.base_url = ""

    async def dead_letter(self, platform_id: str | None, payload: str | bytes, reason: str) -> None:
        self.dead_letters.append((platform_id, payload, reason))

    def recipient_online(self, chat_id: str) -> None:
        self.online.append(chat_id)

    def register_secret(self, value: str) -> None:
        self.secrets.append(value)

    async def wait_for_messages(self, count: int, timeout: float = 5.0) -> list[InboundMessage]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.received) >= count)
        return self.received

    async def _consume(self) -> None:
        while True:
            message = await self.bus.get()
            if message is None:
                return
            key = (message.channel, message.message_id)
            duplicate = key in self._seen
            self._seen.add(key)
            if not duplicate:
                async with self._arrived:
                    self.received.append(message)
                    self._arrived.notify_all()
            if message.receipt is not None and not message.receipt.done():
                message.receipt.set_result(Receipt.DUPLICATE if duplicate else Receipt.ACCEPTED)


@asynccontextmanager
async def channel_runtime(
    channel: Channel, media_dir: Path, state: dict[str, str] | None = None
) -> AsyncIterator[TestRuntime]:
    """Set up `channel` on a TestRuntime (with `state` stored already), serve its
    routes, start it; stop on exit."""
    runtime = TestRuntime(media_dir)
    runtime.state.values.update(state or {})
    channel.setup(runtime)
    runner = web.AppRunner(runtime.app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    runtime.base_url = f"http://127.0.0.1:{port}"
    consumer = asyncio.create_task(runtime._consume(), name="test-runtime-consumer")
    try:
        await channel.start()
        yield runtime
    finally:
        await channel.stop()
        consumer.cancel()
        with suppress(asyncio.CancelledError):
            await consumer
        await runner.cleanup()
