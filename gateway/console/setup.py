"""The console for the composition root: `ConsoleParts` is what the gateway
hands over (its store, config and running parts), `ConsoleFeature.mount`
puts each view's routes under `/api/ops/` behind the admin guard. Mounted
before the web UI, whose catch-all GET answers the page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from agent.mcp.manager import McpManager
from channels.base import Channel
from gateway.access.policy import AccessPolicy
from gateway.approvals.service import Approvals
from gateway.clock import Clock
from gateway.commands import CommandRegistry
from gateway.config.loading import LoadedConfig
from gateway.console.api import ConsoleApi, View
from gateway.console.delivery import DeliveryView
from gateway.console.guard import Guard, NamedToken
from gateway.console.schedule import JobsReader, ScheduleView
from storage.store import Store

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

    def views(self) -> list[View]:
        """Every console view, one line each."""
        return [
            DeliveryView(self.store, self.wake, self.checks),
            ScheduleView(self.jobs_view),
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

    def mount(self, app: web.Application) -> ConsoleApi:
        api = ConsoleApi(self.guard(), self.views())
        api.mount(app)
        return api


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
