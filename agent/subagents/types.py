"""What a sub-agent type is, the two built-in ones, and one `task` call's request.

A type says which tools its child may use (None: the parent's, always minus
`task`: a sub-agent never spawns another), how its first message is written
from the `task` arguments, how long it may run and which agent runs it.
A leaf of agent/: it imports nothing from the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "EXPLORE",
    "EXPLORE_TOOLS",
    "GENERAL",
    "TASK_TOOL",
    "SubagentSource",
    "SubagentTask",
    "SubagentType",
    "child_session_id",
]

TASK_TOOL = "task"

# Read-only: no write/edit/bash, and no http_request (it can POST).
EXPLORE_TOOLS = frozenset(
    {"read", "get_time", "calculator", "web_fetch", "memory_search", "skill_activate"}
)


class SubagentSource(StrEnum):
    BUILTIN = "builtin"
    USER = "user"
    PROJECT = "project"


@dataclass(frozen=True, slots=True)
class SubagentType:
    name: str
    description: str
    prompt_template: str  # `{{description}}` and `{{prompt}}` are filled in
    body: str = ""  # SUBAGENT.md after its front matter: appended to the template
    allowed_tools: frozenset[str] | None = None  # None: the parent's tools
    max_execution_secs: float | None = None  # None: subagents.default_max_execution_secs
    agent: str | None = None  # the named agent that runs it; None: the parent's channel default
    source: SubagentSource = SubagentSource.BUILTIN
    path: Path | None = None  # its SUBAGENT.md

    def instructions(self, description: str, prompt: str) -> str:
        """The child's system message: the filled template, then the body, then
        the prompt if the template did not place it (so it is never lost)."""
        text = self.prompt_template.replace("{{description}}", description)
        text = text.replace("{{prompt}}", prompt).strip()
        parts = [text, self.body.strip()]
        if "{{prompt}}" not in self.prompt_template:
            parts.append(prompt.strip())
        return "\n\n".join(p for p in parts if p)


_BUILTIN_TEMPLATE = (
    "You are a sub-agent doing one task for the main agent, in a context of your own.\n"
    "Task: {{description}}\n\n"
    "Instructions:\n{{prompt}}\n\n"
    "Work on it with your tools, then answer with a concise final report: the main "
    "agent sees only your last message."
)

GENERAL = SubagentType(
    "general",
    "Multi-step work with the full toolset.",
    _BUILTIN_TEMPLATE,
)
EXPLORE = SubagentType(
    "explore",
    "Read-only research; it changes nothing.",
    _BUILTIN_TEMPLATE + "\nYou are read-only: you have no tool that writes or changes anything.",
    allowed_tools=EXPLORE_TOOLS,
)


@dataclass(frozen=True, slots=True)
class SubagentTask:
    """One `task` call: the type it runs as and what it was asked."""

    kind: SubagentType
    description: str
    prompt: str


def child_session_id(parent_session_id: str, call_id: str) -> str:
    """The child's session: derived from the parent's and the tool call, so a
    resumed call finds the transcript it had begun."""
    return f"task:{parent_session_id}:{call_id}"
