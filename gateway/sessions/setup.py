"""Sessions' parts for the composition root, each built at its step there:
the conversation gates and the compactor (before the turns that report to
it), the messenger the `send_session_message` tool uses, the session manager
(answered approvals go back into its queues), and the session and steering
commands."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from gateway.approvals.service import Approvals
from gateway.clock import Clock
from gateway.commands import CommandRegistry
from gateway.config.core import GatewayConfig
from gateway.lifecycle import ShutdownBudget
from gateway.sessions.commands import SessionCommands
from gateway.sessions.compaction import Compactor
from gateway.sessions.manager import ConversationGates, SessionManager, TurnDone
from gateway.sessions.messages import OutboxMessenger
from gateway.sessions.steering import ApprovalCommands
from gateway.sessions.usage import usage_status
from gateway.turns.agents import AgentDirectory
from gateway.turns.execution import ExecutionService
from gateway.turns.run_slots import RunSlots
from gateway.work import ReplySink
from storage.store import Store

__all__ = ["SessionsFeature"]


@dataclass(frozen=True, slots=True)
class SessionsFeature:
    gates: ConversationGates
    compactor: Compactor

    @classmethod
    def build(
        cls,
        store: Store,
        history_changed: Callable[[str, str], None],
        wake: Callable[[str], None],
    ) -> SessionsFeature:
        gates = ConversationGates()
        return cls(gates, Compactor(store, gates, history_changed, wake))

    @staticmethod
    def messenger(
        store: Store,
        sink: ReplySink,
        channels: Collection[str],
        history_changed: Callable[[str, str], None],
        clock: Clock,
    ) -> OutboxMessenger:
        return OutboxMessenger(store, sink, channels, history_changed, clock=clock)

    def manager(
        self,
        execution: ExecutionService,
        approvals: Approvals,
        *,
        slots: RunSlots,
        config: GatewayConfig,
        on_turn_done: TurnDone,
        budget: ShutdownBudget,
    ) -> SessionManager:
        """The session manager; an answered approval goes back into its queue."""
        sessions = SessionManager(
            execution,
            self.gates,
            slots=slots,
            queue_mode=config.queue_mode,
            max_pending=config.max_pending_per_session,
            on_turn_done=on_turn_done,
            budget=budget,
        )
        approvals.dispatch = lambda item: sessions.dispatch(item, force=True)
        return sessions

    def add_commands(
        self,
        store: Store,
        sessions: SessionManager,
        registry: CommandRegistry,
        *,
        history_changed: Callable[[str, str], None],
        approvals: Approvals,
        agents: AgentDirectory,
    ) -> SessionCommands:
        """The session commands, added to `registry` (the console archives
        and deletes through them too)."""
        compactor = self.compactor
        return SessionCommands(
            store,
            sessions,
            registry,
            history_changed=history_changed,
            waiting_approval=approvals.has_open,
            compact=lambda item, sid: compactor.request(
                item, sid, agents.resolve(item.message.channel)
            ),
            status_line=lambda stats, ch, loc: Compactor.status_line(
                stats, agents.resolve(ch), loc
            ),
            usage_line=lambda stats, ch, loc: usage_status(stats, agents.resolve(ch), loc),
        )

    @staticmethod
    def add_steering(
        approvals: Approvals, sessions: SessionManager, registry: CommandRegistry
    ) -> None:
        """/approve, /deny and /steer, added to `registry`."""
        ApprovalCommands(approvals, sessions, registry)
