"""The provider contract: one chat-completion call, optionally streamed.

Providers map `ChatMessage` lists to their wire format and back. They never
touch storage or channels. Errors form one tree so the agent loop can tell the
user something short and the log something precise:

    ProviderError             (`status`: the HTTP status it came with, if any;
    │                          404 is a model the service does not have)
    ├── ProviderConfigError   (missing key, unknown model: not retried)
    ├── ProviderAuthError     (401/403: not retried)
    ├── ProviderRateLimited   (429, retry_after)
    ├── ProviderUnavailable   (5xx, timeouts, connection errors)
    └── ProviderContextOverflow (413, or a context-length error: the request
                                 must shrink; the loop compacts and retries once)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from agent.messages import ChatMessage, ToolCall, Usage

__all__ = [
    "REQUEST_HEADERS",
    "CacheTTL",
    "DeltaSink",
    "LLMProvider",
    "LLMRequest",
    "LLMResponse",
    "PromptCacheSettings",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderContextOverflow",
    "ProviderError",
    "ProviderKeyMissing",
    "ProviderRateLimited",
    "ProviderSettings",
    "ProviderUnavailable",
    "ToolSpec",
]

DeltaSink = Callable[[str], Awaitable[None]]

# Headers the runtime adds to each request a provider sends in this context:
# the W3C `traceparent` of the model call's span while tracing is on
# (gateway.ops.tracing). None, the default: nothing is added.
REQUEST_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("request_headers", default=None)


class ProviderError(Exception):
    """Base of every failure a provider reports."""

    retryable: bool = False
    status: int | None = None  # the HTTP status (classify_status), for model fallback


class ProviderConfigError(ProviderError):
    pass


class ProviderKeyMissing(ProviderConfigError):
    """The provider has no API key; `setting` names what to set."""

    def __init__(self, provider: str, setting: str) -> None:
        super().__init__(f"provider '{provider}' has no API key: set {setting}")
        self.provider = provider
        self.setting = setting


class ProviderAuthError(ProviderError):
    pass


class ProviderContextOverflow(ProviderError):
    """The request is larger than the model or the service accepts."""


class ProviderRateLimited(ProviderError):
    retryable = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    retryable = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One call. `messages` is the cacheable part, most stable first (operator
    prompt, AGENT.md, compaction summary, then the append-only history);
    `tail` holds per-turn blocks that go after it and never into the cached
    prefix; `cache_key` names the conversation the request belongs to —
    None for a one-off request (a compaction summary) that no later request
    repeats, which therefore gets no cache hints (a cache write costs more
    than plain input)."""

    model: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    tail: Sequence[ChatMessage] = ()
    cache_key: str | None = None


@dataclass(slots=True)
class LLMResponse:
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_content: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    model: str | None = None  # the model id that answered, when not the one asked (a fallback)


class LLMProvider(Protocol):
    name: str

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        """Run one completion. `on_delta` receives text deltas as they stream."""
        ...

    async def aclose(self) -> None: ...


class CacheTTL(StrEnum):
    """How long an Anthropic cache breakpoint lives (refreshed on every hit)."""

    FIVE_MINUTES = "5m"
    ONE_HOUR = "1h"


@dataclass(frozen=True, slots=True)
class PromptCacheSettings:
    """`providers.<name>.prompt_cache*`: what a provider adds to help the
    service cache the request prefix. Off changes nothing about the order of
    the request; it only leaves the hints out."""

    enabled: bool = True
    ttl: CacheTTL = CacheTTL.FIVE_MINUTES  # Anthropic breakpoints
    send_key: bool = False  # OpenAI-compatible: send `prompt_cache_key`


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """What a provider needs, mapped from `providers.<name>` by the composition root."""

    name: str
    api_key: str
    base_url: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    timeout_secs: float = 120.0
    max_retries: int = 3  # extra attempts after the first, for retryable errors
    retry_max_wait_secs: float = 60.0  # cap on one wait and on the sum of waits
    api_key_hint: str | None = None  # e.g. "OPENAI_API_KEY", named in the missing-key error
    prompt_cache: PromptCacheSettings = field(default_factory=PromptCacheSettings)
