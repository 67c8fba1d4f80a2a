"""Long-term memory's parts, built for the composition root in one call:
the tools' service, the summary context part, AGENT.md's block writer and
the maintenance pass (which the composition root registers as the
scheduler's `memory_maintenance` event handler); its commands are added
later, in their turn among the others (`add_commands`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.memory.summary_part import MemorySummaryPart
from agent.providers.base import LLMProvider
from gateway.commands import CommandRegistry
from gateway.config.core import Config
from gateway.memory.commands import MemoryCommands
from gateway.memory.maintenance import MemoryMaintenance
from gateway.memory.service import MemoryGateway, SummaryFile
from storage.units.memories import MemoryStore

__all__ = ["MemoryFeature", "build_memory"]


@dataclass(frozen=True, slots=True)
class MemoryFeature:
    service: MemoryGateway
    part: MemorySummaryPart
    summary_file: SummaryFile
    maintenance: MemoryMaintenance

    def add_commands(self, store: MemoryStore, registry: CommandRegistry) -> None:
        """The memory commands, added to `registry`."""
        MemoryCommands(store, self.summary_file, registry)


def build_memory(
    config: Config,
    store: MemoryStore,
    providers: Mapping[str, LLMProvider],
    agent_prompt_path: Path,
    charged: Callable[[LLMProvider, str], LLMProvider] = lambda provider, agent: provider,
) -> MemoryFeature:
    """Maintenance uses the `default` agent (else the first one): its provider
    (as `charged` wraps it: its calls count against the budgets of the user
    whose memory it tidies), its model and that provider's
    `memory_maintenance_timeout_secs`."""
    service = MemoryGateway(store)
    summary_file = SummaryFile(store, agent_prompt_path)
    name = "default" if "default" in config.agents else next(iter(config.agents))
    agent = config.agents[name]
    model = config.models[agent.model]
    maintenance = MemoryMaintenance(
        store,
        summary_file,
        charged(providers[agent.provider], name),
        model.model_id,
        timeout_secs=config.providers[agent.provider].memory_maintenance_timeout_secs,
        max_tokens=model.max_tokens,
    )
    return MemoryFeature(service, MemorySummaryPart(service), summary_file, maintenance)
