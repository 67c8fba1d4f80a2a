"""Which tool calls need a person's yes before they run (`tools.approval`).

Pure and synchronous: it reads a call's name and JSON arguments and the
workspace, never runs anything. The runtime (gateway.approvals.service) stores a held
call and asks the chat; this module only says which calls are held.

A `bash` command matches an allowed pattern only when it is one simple
command: anything with a shell operator or substitution (`;`, `&&`, `|`,
`` ` ``, `$(`, redirections, a newline) is never auto-allowed, so
`ls; rm -rf ~` does not pass as `ls`.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from agent.messages import ToolCall
from agent.tools.paths import real_path

__all__ = ["ApprovalMode", "ApprovalPolicy", "ApprovalRule", "command_allowed"]


class ApprovalMode(StrEnum):
    NEVER = "never"
    ALWAYS = "always"
    OUTSIDE_WORKSPACE = "outside_workspace"  # file tools: a path that leaves the workspace


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    mode: ApprovalMode = ApprovalMode.ALWAYS
    allow: tuple[str, ...] = ()  # shell commands that run without asking (glob patterns)


# anything that could run or read more than the pattern names: bash operators,
# substitutions, and PowerShell's subexpressions and script blocks (`shell` on Windows)
_SHELL_OPERATORS = re.compile(r"[;&|`<>\n\r(){}@]|\$\(|\$\{")
_PATH_ARGS = ("path", "file_path", "target")


def command_allowed(command: str, patterns: Sequence[str]) -> bool:
    """Whether `command` is one simple command matching a pattern: the
    pattern itself, the pattern followed by arguments ("ls" allows "ls -la"),
    or a glob match ("git log *")."""
    text = " ".join(command.split())
    if not text or _SHELL_OPERATORS.search(command):
        return False
    for pattern in patterns:
        p = " ".join(pattern.split())
        if p and (text == p or text.startswith(p + " ") or fnmatch.fnmatchcase(text, p)):
            return True
    return False


def _arguments(call: ToolCall) -> dict[str, object]:
    try:
        raw = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):  # not JSON; nested too deeply to read
        return {}
    return raw if isinstance(raw, dict) else {}


def _outside(path: object, workspace: Path) -> bool:
    """A path the call names that is not inside the workspace (or not a
    string, or not one that resolves: a symlink loop is held, not raised)."""
    if not isinstance(path, str):
        return True
    try:
        root = real_path(workspace)
        target = Path(path).expanduser()
        resolved = real_path(target if target.is_absolute() else root / target)
    except (OSError, ValueError):  # a loop; a NUL in the path
        return True
    return not resolved.is_relative_to(root)


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    rules: Mapping[str, ApprovalRule] = field(default_factory=dict)
    timeout_secs: float = 3600.0

    @property
    def active(self) -> bool:
        return any(r.mode is not ApprovalMode.NEVER for r in self.rules.values())

    def needs_approval(self, call: ToolCall, workspace: Path) -> bool:
        rule = self.rules.get(call.name)
        if rule is None or rule.mode is ApprovalMode.NEVER:
            return False
        args = _arguments(call)
        if rule.allow:
            command = args.get("command")
            if isinstance(command, str) and command_allowed(command, rule.allow):
                return False
        if rule.mode is ApprovalMode.OUTSIDE_WORKSPACE:
            named = [args[k] for k in _PATH_ARGS if k in args]
            return not named or any(_outside(p, workspace) for p in named)
        return True

    def held(self, calls: Sequence[ToolCall], workspace: Path) -> list[ToolCall]:
        """The calls of a batch that wait for a person, in call order."""
        return [c for c in calls if self.needs_approval(c, workspace)]
