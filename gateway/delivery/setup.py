"""Delivery's parts for the composition root: the configured channels (built
before storage opens), then, once it is open, the outbox dispatcher that sends
to them, the file sender the tools use, each channel's runtime (what
`Channel.setup` gets), its readiness probe and its `Service`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from channels.base import Channel, HttpMount
from gateway.bus import MessageBus
from gateway.config.core import Config
from gateway.delivery.files import OutboxFileSender
from gateway.delivery.outbound import OutboundDispatcher, SendGate
from gateway.delivery.policy import RetryPolicy
from gateway.delivery.registry import build_channels
from gateway.delivery.runtime import (
    ChannelState,
    GatewayChannelRuntime,
    channel_service,
    not_ready_reason,
)
from gateway.i18n import Locale
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.lifecycle import Service, ShutdownBudget
from gateway.ops.metrics import Metrics
from storage.store import Store

__all__ = ["DeliveryFeature"]


@dataclass(frozen=True, slots=True)
class DeliveryFeature:
    dispatcher: OutboundDispatcher
    channels: Mapping[str, Channel]  # by name
    media_dir: Path

    @staticmethod
    def configured_channels(config: Config) -> list[Channel]:
        """The channels the config enables (the root adds an embedder's own)."""
        return build_channels(config)

    @classmethod
    def build(
        cls,
        config: Config,
        store: Store,
        channels: Mapping[str, Channel],
        *,
        metrics: Metrics,
        budget: ShutdownBudget,
        locale_of: Callable[[str], Locale],
        media_dir: Path,
        gate: SendGate | None = None,
    ) -> DeliveryFeature:
        """`gate`: with several workers, which channels this one sends."""
        gateway = config.gateway
        dispatcher = OutboundDispatcher(
            store,
            channels,
            RetryPolicy(
                base_secs=gateway.outbound_retry_base_secs,
                max_secs=gateway.outbound_retry_max_secs,
                give_up_after_secs=gateway.outbound_give_up_after_secs,
                stale_notice_secs=gateway.outbound_stale_notice_secs,
            ),
            send_timeout_secs=gateway.send_timeout_secs,
            rescan_secs=gateway.outbox_rescan_secs,
            metrics=metrics,
            budget=budget,
            locale_of=locale_of,
            gate=gate,
        )
        return cls(dispatcher, channels, media_dir)

    def file_sender(self) -> OutboxFileSender:
        return OutboxFileSender(self.dispatcher, self.channels, self.media_dir)

    def connect(
        self,
        channel: Channel,
        bus: MessageBus,
        store: Store,
        mount: HttpMount,
        dead_letters: DeadLetterSink,
    ) -> None:
        """`channel.setup` with its runtime: the bus, its state, its routes, the outbox."""
        channel.setup(
            GatewayChannelRuntime(
                bus,
                ChannelState(store, channel.name),
                mount,
                self.media_dir,
                channel.name,
                self.dispatcher,
                dead_letters,
            )
        )

    def not_ready_reason(self, channel: Channel) -> Callable[[], str | None]:
        return not_ready_reason(channel, self.dispatcher)

    @staticmethod
    def service(channel: Channel) -> Service:
        return channel_service(channel)
