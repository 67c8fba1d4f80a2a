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
from gateway.config_agents import FrozenModel

__all__ = ["ApprovalConfig", "ToolApprovalConfig"]


class ToolApprovalConfig(FrozenModel):
    mode: ApprovalMode = ApprovalMode.ALWAYS
    allow: list[str] = Field(default_factory=list)


class ApprovalConfig(FrozenModel):
    timeout_secs: float = Field(3600.0, gt=0)
    tools: dict[str, ApprovalMode | ToolApprovalConfig] = Field(default_factory=dict)

    def policy(self) -> ApprovalPolicy:
        rules = {
            name: ApprovalRule(entry)
            if isinstance(entry, ApprovalMode)
            else ApprovalRule(entry.mode, tuple(entry.allow))
            for name, entry in self.tools.items()
        }
        return ApprovalPolicy(rules, self.timeout_secs)
