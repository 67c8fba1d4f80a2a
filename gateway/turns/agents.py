"""Agents by name: `agents.<name>` profiles, resolved for the channel a turn runs on.

A channel's `agent` key names its default agent; a turn's request (a
scheduled job's `agent` key, later a sub-agent or a web session) may name
another. A profile depends on the channel too (streaming, the channel's tool
filter), so profiles are built per (agent, channel) on first use and kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agent.compaction import CompactionResult, compact
from agent.context import ContextBuilder, ContextPart, ContextSettings
from agent.loop import LoopSettings
from agent.messages import ChatMessage
from agent.providers import deferred_provider
from agent.providers.base import CacheTTL, LLMProvider, PromptCacheSettings, ProviderSettings
from agent.providers.fallback import FallbackProvider, FallbackTarget
from agent.tools.base import ToolRegistry
from channels.base import ChannelSettings
from gateway.clock import Clock, utc_now
from gateway.config.agents import model_costs
from gateway.config.core import CompactionConfig, Config, ModelPrices, ProviderConfig
from gateway.config.loading import LoadedConfig
from gateway.ops import tracing
from gateway.ops.metered import fallback_counter
from gateway.turns.transcription import Transcriber, build_transcriber

__all__ = [
    "AgentDirectory",
    "AgentProfile",
    "UnknownAgent",
    "agent_provider",
    "build_profile",
    "build_providers",
    "provider_settings",
    "sends_cache_key",
]


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
    prices: ModelPrices | None = None  # for the /status cost estimate
    transcriber: Transcriber | None = None  # voice notes to text (gateway.turns.transcription)

    @property
    def open_budget_chars(self) -> int:
        """How much of a long segment a turn opening from storage reads: up to
        the compaction trigger (which then compacts it), else the window."""
        ratio = self.compaction.trigger_ratio if self.compaction.enabled else 1.0
        return int(self.context_window_tokens * ratio * 10 / 3)  # 1 token ≈ 10/3 chars

    async def rescue(self, history: Sequence[ChatMessage]) -> CompactionResult | None:
        """The compaction an overflowing request gets before its one retry (AgentLoop)."""
        with tracing.compaction("overflow"):
            return await compact(
                history,
                self.provider,
                self.summary_model or self.loop.model,
                self.context_window_tokens,
                self.compaction.keep_user_turns,
                timeout_secs=self.summary_timeout_secs,
            )


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


def sends_cache_key(p: ProviderConfig) -> bool:
    """Whether requests carry `prompt_cache_key`: some OpenAI-compatible servers
    refuse fields they do not know, so by default only OpenAI itself gets it."""
    if p.type != "openai" or p.prompt_cache == "off":
        return False
    if p.prompt_cache_key is not None:
        return p.prompt_cache_key
    host = urlsplit(p.base_url).hostname if p.base_url else "api.openai.com"
    return host is not None and (host == "openai.com" or host.endswith(".openai.com"))


def provider_settings(loaded: LoadedConfig, name: str) -> ProviderSettings:
    """`providers.<name>` as the provider takes it."""
    p = loaded.config.providers[name]
    return ProviderSettings(
        name=name,
        api_key=p.api_key.get_secret_value(),
        base_url=p.base_url,
        extra_headers=dict(p.extra_headers),
        timeout_secs=p.llm_timeout_secs,
        max_retries=p.max_retries,
        retry_max_wait_secs=p.retry_max_wait_secs,
        api_key_hint=loaded.missing_env.get(f"providers.{name}.api_key"),
        prompt_cache=PromptCacheSettings(
            enabled=p.prompt_cache == "auto",
            ttl=CacheTTL(p.prompt_cache_ttl),
            send_key=sends_cache_key(p),
        ),
    )


def build_providers(loaded: LoadedConfig) -> dict[str, LLMProvider]:
    """Each built at its first call: start-up never imports an LLM SDK."""
    return {
        name: deferred_provider(p.type, provider_settings(loaded, name))
        for name, p in loaded.config.providers.items()
    }


def agent_provider(
    config: Config,
    agent_name: str,
    providers: Mapping[str, LLMProvider],
    clock: Clock = utc_now,
) -> LLMProvider:
    """The agent's provider; with `fallbacks`, a FallbackProvider over its
    model, then each fallback (agent.providers.fallback), timing its waits by
    the gateway's `clock`. Its state (which model failed a moment ago) is kept
    per profile, so per agent and channel."""
    agent = config.agents[agent_name]
    primary = providers[agent.provider]
    if not agent.fallbacks:
        return primary
    targets = [FallbackTarget(primary, None, config.models[agent.model].context_window_tokens)]
    for fallback in agent.fallbacks:
        model = config.models[fallback.model]
        targets.append(
            FallbackTarget(
                providers[fallback.provider],
                model.model_id,
                model.context_window_tokens,
                temperature=model.temperature,
                max_tokens=model.max_tokens,
            )
        )
    return FallbackProvider(
        targets,
        retry_secs=agent.fallback_retry_secs,
        on_switch=fallback_counter(primary, agent_name),
        clock=lambda: clock().timestamp(),
    )


def build_profile(
    config: Config,
    agent_name: str,
    providers: Mapping[str, LLMProvider],
    registry: ToolRegistry,
    settings: ChannelSettings | None,
    *,
    stream: bool,
    parts: Sequence[ContextPart] = (),
    clock: Clock = utc_now,
) -> AgentProfile:
    """`parts`: blocks injected into every turn (e.g. which MCP servers are down)."""
    agent = config.agents[agent_name]
    model = config.models[agent.model]
    tools = registry
    if settings is not None:
        tools = registry.narrowed(settings.tools.allow, settings.tools.deny)
    loop = LoopSettings(
        model=model.model_id,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        max_tool_iterations=agent.max_tool_iterations,
        max_identical_tool_calls=agent.max_identical_tool_calls,
        max_turn_tokens=agent.max_turn_tokens,
        max_turn_cost=agent.max_turn_cost,
        cost_of=model_costs(config.models),
        tool_result_max_chars=agent.tool_result_max_chars,
        stream=stream,
        context_window_tokens=model.context_window_tokens,
        supports_vision=model.supports_vision,
    )
    context = ContextBuilder(
        ContextSettings(agent.system_prompt, agent.context_tool_result_trim_chars), parts
    )
    summary = config.models[agent.compaction.summary_model or agent.model]
    return AgentProfile(
        agent_name,
        agent_provider(config, agent_name, providers, clock),
        loop,
        tools,
        context,
        model.supports_vision,
        context_window_tokens=model.context_window_tokens,
        compaction=agent.compaction,
        summary_model=summary.model_id,
        summary_timeout_secs=config.providers[agent.provider].llm_timeout_secs,
        prices=model.prices,
        transcriber=build_transcriber(config, agent_name),
    )
