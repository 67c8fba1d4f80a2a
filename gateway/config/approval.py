"""`tools.approval`: which tool calls wait for a person's yes (docs/approvals.md).

    "approval": {
      "timeout_secs": 3600,
      "tools": {
        "bash": {"mode": "always", "allow": ["ls", "cat", "git status"]},
        "write": "outside_workspace"
      }
    }

A tool's entry is a mode or an object with `mode` and `allow` (shell command
patterns that run without asking). Tools not named run without asking.
"""

from __future__ import annotations

from pydantic import Field

from agent.approval import ApprovalMode, ApprovalPolicy, ApprovalRule
from agent.tools.builtin import SHELL_ALIASES
from gateway.config.agents import FrozenModel

__all__ = ["ApprovalConfig", "ToolApprovalConfig"]


class ToolApprovalConfig(FrozenModel):
    mode: ApprovalMode = ApprovalMode.ALWAYS
    allow: list[str] = Field(default_factory=list)


class ApprovalConfig(FrozenModel):
    timeout_secs: float = Field(3600.0, gt=0)
    tools: dict[str, ApprovalMode | ToolApprovalConfig] = Field(default_factory=dict)

    def policy(self) -> ApprovalPolicy:
        rules: dict[str, ApprovalRule] = {}
        for name, entry in self.tools.items():
            rule = (
                ApprovalRule(entry)
                if isinstance(entry, ApprovalMode)
                else ApprovalRule(entry.mode, tuple(entry.allow))
            )
            # `bash` and `shell` name the one shell tool, whichever the platform calls it
            for alias in SHELL_ALIASES if name in SHELL_ALIASES else (name,):
                rules[alias] = rule
        return ApprovalPolicy(rules, self.timeout_secs)
