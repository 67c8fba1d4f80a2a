"""`ClusterFeature`: this gateway as a worker of a deployment on one PostgreSQL
database (docs/scale-out.md), for the composition root; None on SQLite."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from channels.base import Channel
from gateway.cluster.channels import ChannelLeases
from gateway.cluster.chats import ChatLeases
from gateway.cluster.worker import ClusterWorker, WorkerIdentity
from gateway.config.core import Config
from gateway.lifecycle import Service
from storage.store import Store

__all__ = ["ClusterFeature"]


@dataclass(frozen=True, slots=True)
class ClusterFeature:
    worker: ClusterWorker
    chats: ChatLeases
    channels: ChannelLeases

    @classmethod
    def build(
        cls,
        config: Config,
        store: Store,
        channels: Sequence[Channel],
        address: Callable[[], str],
    ) -> ClusterFeature | None:
        """Workers share a database that can have several (PostgreSQL); on
        SQLite the gateway is one process and this is None."""
        if not store.db.shared:
            return None
        identity = WorkerIdentity.new(config.cluster.worker_name, config.gateway.port)
        # every log line of this process says which worker wrote it
        structlog.contextvars.bind_contextvars(worker=identity.id)
        worker = ClusterWorker(store, identity, config.cluster.lease_secs, address)
        local = [c.name for c in channels if c.local_recipients]
        leases = ChannelLeases(worker, {c.name: c for c in channels}, local)
        return cls(worker, ChatLeases(worker), leases)

    def services(self) -> list[Service]:
        """The worker first (registered before anything takes a lease), then
        the channel leases; stopped in reverse, the worker hands over last."""
        return [self.worker, self.channels]

    def channel_service(self, channel: Channel, alone: Service) -> Service:
        """`alone` (the channel's service) unless the channel has one connection
        per account: then it runs only while this worker holds its lease."""
        return self.channels.service(channel) if channel.exclusive_connection else alone

    def not_ready_reason(
        self, channel: Channel, alone: Callable[[], str | None]
    ) -> Callable[[], str | None]:
        """A channel another worker runs is no reason for this one not to be ready."""
        return lambda: None if self.channels.standby(channel.name) else alone()

    def details(self) -> dict[str, Any]:
        """More of /ready's body."""
        standby = sorted(n for n in self.channels.exclusive if self.channels.standby(n))
        return {"worker": {**self.worker.details(), "standby": standby}}

    def lease_counts(self) -> dict[str, int]:
        """For /metrics: leases held, by kind."""
        held = self.worker.held
        chats = sum(1 for k in held if k.startswith("chat:"))
        return {"chat": chats, "channel": len(held) - chats}
