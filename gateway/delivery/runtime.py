"""What the composition root hands each channel: its `ChannelRuntime` (the
bus, its persistent state, the HTTP mount, media, dead letters, the parked-
reply wake-up, secret registration), its readiness probe and its `Service`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from channels.base import Channel, HttpMount, StateStore
from gateway.bus import MessageBus
from gateway.delivery.outbound import OutboundDispatcher
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.lifecycle import Service, Stage
from gateway.ops.logging import register_secrets
from storage.store import Store

__all__ = ["ChannelState", "GatewayChannelRuntime", "channel_service", "not_ready_reason"]


class ChannelState:
    """StateStore for one channel on the channel_state table."""

    def __init__(self, store: Store, channel: str) -> None:
        self._store = store
        self._channel = channel

    async def get(self, key: str) -> str | None:
        return await self._store.channel_state(self._channel, key)

    async def set(self, key: str, value: str) -> None:
        await self._store.set_channel_state(self._channel, key, value)


@dataclass(slots=True)
class GatewayChannelRuntime:
    """The ChannelRuntime handed to one channel."""

    bus: MessageBus
    state: StateStore
    http: HttpMount
    media_dir: Path
    channel: str
    dispatcher: OutboundDispatcher | None = None
    dead_letters: DeadLetterSink | None = None

    async def dead_letter(self, platform_id: str | None, payload: str | bytes, reason: str) -> None:
        if self.dead_letters is None:
            raise RuntimeError("no dead-letter store")  # the caller must not acknowledge
        await self.dead_letters.record(self.channel, platform_id, payload, reason)

    def recipient_online(self, chat_id: str) -> None:
        if self.dispatcher is not None:
            self.dispatcher.recipient_online(self.channel, chat_id)

    def register_secret(self, value: str) -> None:
        register_secrets([value])


def not_ready_reason(channel: Channel, dispatcher: OutboundDispatcher) -> Callable[[], str | None]:
    """Why the channel is not ready: not connected, or its sends not answered."""
    return lambda: channel.not_ready_reason or dispatcher.sending_problem(channel.name)


def channel_service(channel: Channel) -> Service:
    async def start(tg: asyncio.TaskGroup) -> None:
        await channel.start()

    return Stage(f"channel {channel.name}", start, channel.stop)
