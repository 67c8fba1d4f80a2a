"""LLM providers: the contract lives in `base`, implementations in `openai` and `anthropic`.

`create_provider` is the one factory the composition root calls; it imports an SDK
only when its provider kind is used.
"""

from __future__ import annotations

from agent.providers.base import LLMProvider, ProviderConfigError, ProviderSettings
from agent.providers.deferred import DeferredProvider

__all__ = ["PROVIDER_KINDS", "create_provider", "deferred_provider"]

PROVIDER_KINDS = ("openai", "anthropic")
_MODULES = {"openai": "agent.providers.openai", "anthropic": "agent.providers.anthropic"}


def create_provider(kind: str, settings: ProviderSettings) -> LLMProvider:
    """Build the provider for `providers.<name>.type`; never fails on a missing key."""
    if kind == "openai":
        from agent.providers.openai import OpenAIProvider

        return OpenAIProvider(settings)
    if kind == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(settings)
    raise ProviderConfigError(
        f"provider '{settings.name}' has unknown type {kind!r} (expected one of {PROVIDER_KINDS})"
    )


def deferred_provider(kind: str, settings: ProviderSettings) -> DeferredProvider:
    """`create_provider`'s provider, built at its first call
    (agent.providers.deferred); an unknown kind is refused at once."""
    if kind not in _MODULES:
        create_provider(kind, settings)  # raises ProviderConfigError
    return DeferredProvider(settings.name, _MODULES[kind], lambda: create_provider(kind, settings))
