"""The console for the composition root: `ConsoleFeature` holds what the
gateway hands over (its store, config and running parts); its `mount` puts
each view's routes under `/api/ops/` behind the admin guard. Mounted before
the web UI, whose catch-all GET answers the page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from channels.base import Channel
from gateway.access.policy import AccessPolicy
from gateway.approvals.service import Approvals
from gateway.clock import Clock
from gateway.commands import CommandRegistry
from gateway.config.loading import LoadedConfig
from gateway.console.api import ConsoleApi, Route, View
from gateway.console.conversations import ConversationsView
from gateway.console.delivery import DeliveryView
from gateway.console.guard import Guard, NamedToken
from gateway.console.logs import LogsView
from gateway.console.people import PeopleView
from gateway.console.schedule import JobsReader, ScheduleView
from gateway.console.settings import SettingsView
from gateway.console.tools import ToolsView
from gateway.console.usage import UsageView
from gateway.delivery.outbound import SendingHealth
from gateway.ingress.inbound import InboundProcessor
from gateway.memory.setup import MemoryFeature
from gateway.ops.tail import LOG_TAIL
from gateway.sessions.commands import SessionCommands
from gateway.spend.budget import Budgets
from storage.store import Store

if TYPE_CHECKING:  # the MCP SDK loads with the first server, not at start
    from agent.mcp.manager import McpManager

__all__ = ["ConsoleFeature"]


@dataclass(frozen=True, slots=True)
class ConsoleFeature:
    """The gateway's parts the console's views read and act through."""

    loaded: LoadedConfig
    store: Store
    commands: CommandRegistry
    access: AccessPolicy
    approvals: Approvals
    channels: Sequence[Channel]
    checks: Callable[[], list[tuple[str, str | None]]]  # readiness probes by name
    wake: Callable[[str], None]  # tell a channel's outbox sender to look again
    sending_problem: Callable[[str], str | None]  # why a channel takes no sends now
    jobs_view: JobsReader
    # scheduler.service.Scheduler and skills.runtime.SkillRuntime (None when
    # off): gateway/ may not import those packages; a view names what it uses
    # of them as a Protocol
    scheduler: Any
    mcp: McpManager | None
    skills: Any
    clock: Clock
    budgets: Budgets | None = None  # the gateway's budgets (None: the usage view builds its own)
    memory: MemoryFeature | None = None  # the people view's forget rewrites AGENT.md's block
    sessions: SessionCommands | None = None  # archive and delete, as /archive and /delete
    sending_health: Callable[[str], SendingHealth | None] | None = None  # per channel
    inbound: InboundProcessor | None = None  # retries a dead letter and routes it

    def views(self) -> list[View]:
        """Every console view, one line each."""
        return [
            DeliveryView.of(self),
            ConversationsView(self.store, self.sessions),
            ScheduleView(self.jobs_view, self.scheduler),
            ToolsView.of(self.store, self.mcp, self.loaded.config, self.skills),
            PeopleView(self.store, self.approvals, self.loaded, self.wake, self.clock, self.memory),
            UsageView.of(self.store, self.budgets, self.loaded.config, self.clock),
            LogsView(LOG_TAIL),
            SettingsView(self.loaded),
        ]

    def guard(self) -> Guard:
        config = self.loaded.config
        token = config.gateway.auth_token
        return Guard(
            token.get_secret_value() or None if token else None,
            _named_tokens(self.loaded),
            self.access.is_admin,
            config.channels.websocket.allowed_origins,
            exposed=not config.gateway.loopback_only,
        )

    def mount(self, app: web.Application) -> list[Route]:
        """Every view's routes under /api/ops/; returns them as mounted."""
        api = ConsoleApi(self.guard(), self.views())
        api.mount(app)
        return api.mounted


def _named_tokens(loaded: LoadedConfig) -> list[NamedToken]:
    """The named tokens of the enabled channels: WebSocket tokens, API keys."""
    channels = loaded.config.channels
    named = {
        "websocket": channels.websocket.tokens if channels.websocket.enabled else {},
        "api": channels.api.keys if channels.api.enabled else {},
    }
    return [
        NamedToken(channel, name, secret.get_secret_value())
        for channel, tokens in named.items()
        for name, secret in tokens.items()
    ]
