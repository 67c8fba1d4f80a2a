"""The config sections that describe agents: providers, models (with prices),
agents and their compaction settings. Part of `gateway.config.core`, which
re-exports them; split out only to keep that module small."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from agent.messages import Usage

__all__ = [
    "TEMPERATURE_LIMITS",
    "AgentConfig",
    "CompactionConfig",
    "FallbackModel",
    "FrozenModel",
    "ModelConfig",
    "ModelPrices",
    "ProviderConfig",
    "model_costs",
]


# The temperatures each provider type's API accepts (inclusive): Anthropic
# refuses anything above 1, and every turn would fail.
TEMPERATURE_LIMITS = {"openai": (0.0, 2.0), "anthropic": (0.0, 1.0)}


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProviderConfig(FrozenModel):
    type: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    api_key: SecretStr = SecretStr("")
    extra_headers: dict[str, str] = Field(default_factory=dict)
    prompt_cache: Literal["auto", "off"] = "auto"
    prompt_cache_ttl: Literal["5m", "1h"] = "5m"  # anthropic
    prompt_cache_key: bool | None = None  # openai; None: only to api.openai.com
    llm_timeout_secs: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    retry_max_wait_secs: float = Field(60.0, gt=0)
    # The spec's key; honoured by memory maintenance once that feature lands.
    memory_maintenance_timeout_secs: float = Field(600.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None


class ModelPrices(FrozenModel):
    """What a model costs, per million tokens: the /status estimate and the
    per-turn cost cap (`agents.<name>.max_turn_cost`)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(None, ge=0)  # default: the input price
    cache_write: float | None = Field(None, ge=0)  # default: the input price
    currency: str = Field("USD", min_length=1, max_length=8)

    def cost(self, tokens: Usage) -> float:
        """Uncached input, cache reads, cache writes and output, each at its
        price (a missing cache price falls back to the input price)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            tokens.uncached_input_tokens * self.input
            + tokens.cache_read_tokens * read
            + tokens.cache_write_tokens * write
            + tokens.output_tokens * self.output
        ) / 1_000_000


class ModelConfig(FrozenModel):
    model_id: str = Field(min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0)
    context_window_tokens: int = Field(128_000, gt=0)
    supports_vision: bool = True
    prices: ModelPrices | None = None
    # A speech-to-text model of the same provider (OpenAI-compatible
    # /audio/transcriptions, e.g. "whisper-1"): voice notes reach the agent as text.
    transcription: str | None = Field(None, min_length=1)


def model_costs(models: Mapping[str, ModelConfig]) -> Callable[[str, Usage], float | None]:
    """The cost of a call by the id of the model that answered, at its
    `models.<name>.prices`; None for a model without prices."""
    prices = {m.model_id: m.prices for m in models.values() if m.prices is not None}

    def cost_of(model_id: str, usage: Usage) -> float | None:
        found = prices.get(model_id)
        return found.cost(usage) if found is not None else None

    return cost_of


class CompactionConfig(FrozenModel):
    enabled: bool = True
    trigger_ratio: float = Field(0.5, gt=0, lt=1)
    keep_user_turns: int = Field(3, ge=1)
    summary_model: str | None = None


class FallbackModel(FrozenModel):
    """One entry of `agents.<name>.fallbacks`: names from `providers` and `models`."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)


class AgentConfig(FrozenModel):
    provider: str = "default"
    model: str = "default"
    max_tool_iterations: int = Field(100, ge=1)
    # the loop guard: this many rounds in a row of the same calls with the same results
    # end the turn (agent.loop); 0 turns it off
    max_identical_tool_calls: int = Field(5, ge=0)
    # the turn's spend caps: tokens of every model call (input + output), and the
    # cost of them at the model's prices; null: no cap (agent.loop)
    max_turn_tokens: int | None = Field(1_000_000, gt=0)
    max_turn_cost: float | None = Field(None, gt=0)
    tool_result_max_chars: int = Field(20_000, ge=100)
    context_tool_result_trim_chars: int = Field(2_000, ge=100)
    system_prompt: str | None = None
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    # further models, tried in order when the one before is rate-limited, down,
    # or lacks the model (agent.providers.fallback); a failed one is skipped
    # for fallback_retry_secs (less if its Retry-After says so)
    fallbacks: tuple[FallbackModel, ...] = ()
    fallback_retry_secs: float = Field(60.0, gt=0)
