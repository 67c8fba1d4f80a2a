"""The sub-agent types a gateway offers: general and explore, then the custom
ones found on disk (agent.subagents.discovery), checked against the tools and
agents the gateway has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.subagents.types import EXPLORE, GENERAL, SubagentType

__all__ = ["Resolved", "SubagentCatalog"]


@dataclass(frozen=True, slots=True)
class Resolved:
    kind: SubagentType
    asked: str
    fell_back: bool  # `asked` is no type this gateway has: it runs as general


class SubagentCatalog:
    def __init__(self, custom: Iterable[SubagentType] = ()) -> None:
        self.types: Mapping[str, SubagentType] = {
            GENERAL.name: GENERAL,
            EXPLORE.name: EXPLORE,
            **{k.name: k for k in custom if k.name not in (GENERAL.name, EXPLORE.name)},
        }

    def resolve(self, name: str) -> Resolved:
        kind = self.types.get(name)
        if kind is None:
            return Resolved(GENERAL, name, fell_back=True)
        return Resolved(kind, name, fell_back=False)

    def describe(self) -> str:
        """One line per type, for the `task` tool's description."""
        return "\n".join(f"- {k.name}: {k.description}" for k in self.types.values())
