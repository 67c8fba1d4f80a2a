"""Agents by name: `agents.<name>` profiles, resolved for the channel a turn runs on.

A channel's `agent` key names its default agent; a turn's request (a
scheduled job's `agent` key, later a sub-agent or a web session) may name
another. A profile depends on the channel too (streaming, the channel's tool
filter), so profiles are built per (agent, channel) on first use and kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agent.context import ContextBuilder
from agent.loop import LoopSettings
from agent.providers.base import LLMProvider
from agent.tools.base import ToolRegistry
from gateway.config import CompactionConfig

__all__ = ["AgentDirectory", "AgentProfile", "UnknownAgent"]


class UnknownAgent(LookupError):
    """A turn named an agent, or ran on a channel, that this gateway does not have."""


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """Everything a turn needs from its agent on one channel."""

    name: str
    provider: LLMProvider
    loop: LoopSettings
    tools: ToolRegistry
    context: ContextBuilder
    supports_vision: bool = True
    context_window_tokens: int = 128_000
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    summary_model: str = ""  # model id for compaction summaries (default: the agent's)
    summary_timeout_secs: float = 120.0


ProfileFactory = Callable[[str, str], AgentProfile]  # (agent name, channel) → profile


class AgentDirectory:
    def __init__(
        self,
        channel_agents: Mapping[str, str],
        known_agents: frozenset[str],
        build: ProfileFactory,
    ) -> None:
        """`channel_agents`: each running channel's default agent."""
        self.channel_agents = dict(channel_agents)
        self.known_agents = known_agents
        self._build = build
        self._profiles: dict[tuple[str, str], AgentProfile] = {}

    def resolve(self, channel: str, agent: str | None = None) -> AgentProfile:
        """The profile of `agent` (default: the channel's) on `channel`."""
        default = self.channel_agents.get(channel)
        if default is None:
            raise UnknownAgent(f"no enabled channel named {channel!r}")
        name = agent or default
        key = (name, channel)
        profile = self._profiles.get(key)
        if profile is None:
            if name not in self.known_agents:
                raise UnknownAgent(f"no agent named {name!r}")
            profile = self._profiles[key] = self._build(name, channel)
        return profile
