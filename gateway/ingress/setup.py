"""Ingress's parts, built for the composition root in one call: the dead-letter
sink, and the inbound processor with its access gate. Also hands the session
manager the way back to a turn that storage failed (the processor reloads it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.access.gate import AccessGate
from gateway.access.later import LaterMessages
from gateway.access.policy import AccessPolicy
from gateway.access.rate import SenderRate
from gateway.bus import MessageBus
from gateway.cluster.chats import ChatLeases
from gateway.commands import CommandRegistry
from gateway.config.limits import LimitsConfig
from gateway.i18n.locales import LocaleResolver
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.ingress.handover import Handover
from gateway.ingress.inbound import InboundProcessor
from gateway.lifecycle import ShutdownBudget
from gateway.ops.metrics import Metrics
from gateway.sessions.manager import SessionManager, StorageRetry
from gateway.spend.budget import Budgets
from gateway.work import WorkItem
from storage.store import Store

__all__ = ["IngressFeature"]


@dataclass(frozen=True, slots=True)
class IngressFeature:
    dead_letters: DeadLetterSink
    processor: InboundProcessor
    # limits.over_rate "later": the messages kept for later (a Service); None: refused
    later: LaterMessages | None = None
    # several workers on one database: messages of chats other workers hold
    handover: Handover | None = None

    @classmethod
    def build(
        cls,
        bus: MessageBus,
        store: Store,
        sessions: SessionManager,
        registry: CommandRegistry,
        wake: Callable[[str], None],
        *,
        metrics: Metrics,
        budget: ShutdownBudget,
        policy: AccessPolicy,
        clock: Callable[[], datetime],
        locales: LocaleResolver,
        limits: LimitsConfig,
        budgets: Budgets | None = None,
        chat_leases: ChatLeases | None = None,
        on_forwarded: Callable[[Sequence[WorkItem]], None] | None = None,
    ) -> IngressFeature:
        """`chat_leases`: with several workers on one database, which one runs a
        chat's turns (a `Handover` forwards the others' messages);
        `on_forwarded`: told of each message handed to another worker."""
        dead_letters = DeadLetterSink(store, metrics)
        later = (
            LaterMessages(clock, limits.max_waiting_per_sender)
            if limits.over_rate == "later"
            else None
        )
        processor = InboundProcessor(
            bus,
            store,
            sessions,
            registry,
            wake,
            on_accepted=metrics.inbound,
            budget=budget,
            access=AccessGate(
                policy,
                store,
                wake,
                clock,
                rate=SenderRate(store, limits, metrics.rate_limited),
                budgets=budgets,
                later=later,
            ),
            dead_letters=dead_letters,
            locales=locales,
        )
        # a turn storage failed runs again once writes pass, as recovery runs it
        sessions.storage_retry = StorageRetry(store.db.probe_writes, processor.reload)
        if later is not None:
            later.release = processor.release
        handover = None
        if chat_leases is not None:
            handover = processor.handover = Handover(
                chat_leases, processor.item_of, processor.admit, processor.route_here
            )
            sessions.on_lease_lost = handover.lease_lost
            sessions.fence_of = chat_leases.fence
            if on_forwarded is not None:
                handover.on_forwarded = on_forwarded
        return cls(dead_letters, processor, later, handover)
