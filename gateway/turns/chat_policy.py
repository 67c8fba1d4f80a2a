"""What a channel's chats get besides the reply: session resets and tool progress.

Built once by the composition root from `gateway.*` and each channel's
overrides (`channels.<name>.show_tool_results`, `session_ttl_secs`,
`session_reset_at`), and the channel's capabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from channels.base import Channel
from gateway.bus import Origin
from gateway.config.core import Config
from gateway.i18n import Locale, Msg, tr
from gateway.turns.session_reset import NEVER, ResetPolicy, reset_policy
from gateway.turns.tool_progress import ToolDisplay, tool_display
from storage.sql.conversations.turns import SessionReset

__all__ = ["DEFAULT_POLICY", "ChatPolicy", "build_chat_policies", "show_tool_results"]


# Turns a person asked for follow the chat's reset policy; scheduled jobs and
# sub-agents follow their own session rules (their TurnRequest).
_PEOPLE = frozenset({Origin.CHAT, Origin.WEB})


@dataclass(frozen=True, slots=True)
class ChatPolicy:
    reset: ResetPolicy = NEVER
    tools: ToolDisplay = ToolDisplay.OFF

    def session_reset(
        self, origin: Origin, now: datetime, locale: Locale = Locale.EN
    ) -> SessionReset | None:
        """What a new turn asks storage to check before it opens the chat's session
        (with the notice the chat gets if it does start a new one)."""
        cutoff = self.reset.cutoff(now) if origin in _PEOPLE else None
        return None if cutoff is None else SessionReset(cutoff, tr(locale, Msg.SESSION_RESET))


DEFAULT_POLICY = ChatPolicy()


def show_tool_results(config: Config, channel: str) -> bool:
    settings = config.channels.enabled().get(channel)
    if settings is not None and settings.show_tool_results is not None:
        return settings.show_tool_results
    return config.gateway.show_tool_results


def build_chat_policies(config: Config, channels: Sequence[Channel]) -> dict[str, ChatPolicy]:
    enabled = config.channels.enabled()
    return {
        c.name: ChatPolicy(
            reset_policy(config.gateway, enabled.get(c.name), config.time.zone),
            tool_display(show_tool_results(config, c.name), c.capabilities),
        )
        for c in channels
    }
