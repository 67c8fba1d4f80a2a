"""Turns' parts for the composition root, each built at its step there: the
providers (before storage opens), the agent directory (each channel's agent,
its profile built at first use), the turn opener with AGENT.md, the run slots
that turns and sub-agents share, and the execution service."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.context import ContextPart
from agent.prompt_file import DEFAULT_AGENT_PROMPTS, AgentPromptFile
from agent.providers.base import LLMProvider
from agent.tools.base import ToolRegistry, ToolServices, ToolSettings
from channels.base import Channel
from gateway.approvals.service import Approvals
from gateway.bus import InboundMessage
from gateway.clock import Clock
from gateway.config.core import Config
from gateway.config.loading import LoadedConfig
from gateway.i18n import Locale
from gateway.turns.agents import AgentDirectory, AgentProfile, build_profile, build_providers
from gateway.turns.chat_policy import build_chat_policies
from gateway.turns.execution import AfterTurn, ExecutionService
from gateway.turns.opener import TurnOpener
from gateway.turns.run_slots import RunSlots
from gateway.work import ReplySink
from storage.store import Store

__all__ = ["TurnsFeature"]


@dataclass(frozen=True, slots=True)
class TurnsFeature:
    agents: AgentDirectory

    @staticmethod
    def providers(loaded: LoadedConfig) -> dict[str, LLMProvider]:
        """Each built at its first call: start-up never imports an LLM SDK."""
        return build_providers(loaded)

    @classmethod
    def build(
        cls,
        config: Config,
        channels: Sequence[Channel],
        providers: Mapping[str, LLMProvider],
        registry: ToolRegistry,
        parts: Sequence[ContextPart],
        clock: Clock,
        charged: Callable[[LLMProvider, str], LLMProvider] = lambda provider, agent: provider,
    ) -> TurnsFeature:
        """The agent directory: a channel without a section gets the `default`
        agent. `charged(provider, agent)`: an agent's provider as its turns
        use it (gateway.spend: checked against budgets and charged)."""
        enabled = config.channels.enabled()
        by_name = {c.name: c for c in channels}

        def profile(agent: str, channel: str) -> AgentProfile:
            built = build_profile(
                config,
                agent,
                providers,
                registry,
                enabled.get(channel),
                stream=by_name[channel].capabilities.can_stream,
                parts=parts,
                clock=clock,
            )
            return dataclasses.replace(built, provider=charged(built.provider, agent))

        agents = AgentDirectory(
            {c.name: enabled[c.name].agent if c.name in enabled else "default" for c in channels},
            frozenset(config.agents),
            profile,
        )
        return cls(agents)

    @staticmethod
    async def opener(
        store: Store, agent_dir: Path, locale: Locale, reinject_every: int
    ) -> TurnOpener:
        # a missing AGENT.md is written in the gateway's language (`picobot init` writes one too)
        prompt_file = AgentPromptFile(agent_dir, DEFAULT_AGENT_PROMPTS[locale.value])
        await prompt_file.ensure()
        return TurnOpener(store, prompt_file, reinject_every)

    @staticmethod
    def run_slots(config: Config) -> RunSlots:
        # turns and their sub-agents share one cap (gateway.turns.run_slots)
        return RunSlots(config.gateway.max_concurrent_runs, config.subagents.max_concurrent)

    def execution(
        self,
        config: Config,
        store: Store,
        sink: ReplySink,
        tool_settings: ToolSettings,
        *,
        opener: TurnOpener,
        services: ToolServices,
        after_turn: AfterTurn,
        turn_latency: Callable[[str, float], None],
        channels: Sequence[Channel],
        clock: Clock,
        approvals: Approvals,
        is_admin: Callable[[InboundMessage], bool],
    ) -> ExecutionService:
        return ExecutionService(
            store,
            sink,
            self.agents,
            tool_settings,
            opener=opener,
            services=services,
            after_turn=after_turn,
            turn_latency=turn_latency,
            typing_delay_secs=config.gateway.typing_delay_secs,
            chat_policies=build_chat_policies(config, channels),
            clock=clock,
            approvals=approvals,
            is_admin=is_admin,
        )
