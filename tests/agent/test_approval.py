"""Which tool calls wait for a person (agent/approval.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.approval import ApprovalMode, ApprovalPolicy, ApprovalRule, command_allowed
from agent.messages import ToolCall

ALLOW = ("ls", "cat", "git status", "git log *")


@pytest.mark.parametrize(
    "command",
    ["ls", "ls -la src", "  ls   -la ", "cat notes.md", "git status", "git log --oneline -5"],
)
def test_allowed_commands(command: str) -> None:
    assert command_allowed(command, ALLOW)


@pytest.mark.parametrize(
    "command",
    [
        "lsof",  # a prefix of a word is not the command
        "git push",
        "ls; rm -rf ~",
        "ls && rm x",
        "ls | sh",
        "cat x > y",
        "cat < /etc/shadow",
        "ls `rm x`",
        "ls $(rm x)",
        "ls ${HOME}",
        "ls\nrm x",
        "ls & rm x",
        "",
    ],
)
def test_commands_that_still_ask(command: str) -> None:
    assert not command_allowed(command, ALLOW)


def call(name: str, **args: object) -> ToolCall:
    return ToolCall("c1", name, json.dumps(args))


def test_policy_modes(tmp_path: Path) -> None:
    policy = ApprovalPolicy(
        {
            "bash": ApprovalRule(ApprovalMode.ALWAYS, ALLOW),
            "write": ApprovalRule(ApprovalMode.OUTSIDE_WORKSPACE),
            "read": ApprovalRule(ApprovalMode.NEVER),
        }
    )
    assert policy.active
    assert policy.needs_approval(call("bash", command="rm -rf build"), tmp_path)
    assert not policy.needs_approval(call("bash", command="ls"), tmp_path)
    assert not policy.needs_approval(call("write", path="notes/a.md", content=""), tmp_path)
    assert policy.needs_approval(call("write", path="../escape.md", content=""), tmp_path)
    assert policy.needs_approval(call("write", path="/etc/passwd", content=""), tmp_path)
    assert policy.needs_approval(call("write", content="no path"), tmp_path)
    assert not policy.needs_approval(call("read", path="/etc/passwd"), tmp_path)
    assert not policy.needs_approval(call("calculator", expression="1+1"), tmp_path)
    bad_json = ToolCall("c2", "bash", "{not json")
    assert policy.needs_approval(bad_json, tmp_path)  # unreadable arguments: ask


def test_no_rules_is_inactive() -> None:
    assert not ApprovalPolicy().active
    assert not ApprovalPolicy({"bash": ApprovalRule(ApprovalMode.NEVER)}).active


def test_a_path_that_does_not_resolve_is_held_not_raised(tmp_path: Path) -> None:
    # a model may name any string: a symlink loop in the workspace or a NUL
    # made resolving the path raise out of the turn; it is held for a person
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    policy = ApprovalPolicy({"write": ApprovalRule(ApprovalMode.OUTSIDE_WORKSPACE)})
    for path in ["a/notes.md", "a", "x\x00y"]:
        assert policy.needs_approval(call("write", path=path, content=""), tmp_path)
    assert not policy.needs_approval(call("write", path="c/notes.md", content=""), tmp_path)
