"""SUBAGENT.md parsing and discovery (agent/subagents/), the catalog and the
template: the spec's format, precedence, and what a bad file gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import (
    ChatMessage,
    Role,
    ToolCall,
    pending_tool_calls,
    repair_dangling_tool_calls,
)
from agent.subagents.catalog import SubagentCatalog
from agent.subagents.discovery import SubagentFormatError, parse_subagent, scan
from agent.subagents.types import EXPLORE_TOOLS, GENERAL, SubagentSource

SPEC_EXAMPLE = """---
name: code-review
description: 代码审查代理，用于检查代码质量和安全问题
prompt_template: |
  你是一个专业的代码审查代理。
  任务描述: {{description}}
allowed_tools: [read, bash, web_fetch]
max_execution_secs: 600
---

请重点关注：
- SQL 注入风险
"""


def write(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    path = root / folder / "SUBAGENT.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_spec_example_parses(tmp_path: Path) -> None:
    kind = parse_subagent(SPEC_EXAMPLE, tmp_path / "whatever", SubagentSource.USER)
    assert kind.name == "code-review"
    assert kind.allowed_tools == frozenset({"read", "bash", "web_fetch"})
    assert kind.max_execution_secs == 600
    text = kind.instructions("审查 src/auth", "检查安全漏洞")
    assert text.startswith("你是一个专业的代码审查代理。\n任务描述: 审查 src/auth")
    # the body follows the template; the prompt, not placed by it, comes last
    assert text.index("SQL 注入风险") < text.index("检查安全漏洞")


def test_name_defaults_to_the_folder_and_agent_is_read(tmp_path: Path) -> None:
    text = "---\ndescription: d\nprompt_template: 'do {{prompt}}'\nagent: cheap\n---\n"
    kind = parse_subagent(text, tmp_path / "helper", SubagentSource.PROJECT)
    assert (kind.name, kind.agent, kind.allowed_tools) == ("helper", "cheap", None)
    assert kind.instructions("x", "this") == "do this"  # placed: not appended again


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ("prompt_template: x", "no 'description'"),
        ("description: d", "no 'prompt_template'"),
        ("description: d\nprompt_template: x\nallowed_tools: read", "'allowed_tools'"),
        ("description: d\nprompt_template: x\nmax_execution_secs: -1", "'max_execution_secs'"),
        ("description: d\nprompt_template: x\nname: general", "built-in"),
        ("description: [unclosed", "not valid YAML"),
    ],
)
def test_a_bad_file_says_why(tmp_path: Path, front: str, reason: str) -> None:
    with pytest.raises(SubagentFormatError, match=reason):
        parse_subagent(f"---\n{front}\n---\n", tmp_path / "x", SubagentSource.USER)


def test_project_overrides_user_and_bad_files_are_reported(tmp_path: Path) -> None:
    user, project = tmp_path / "user", tmp_path / "project"
    write(user, "rev", "---\ndescription: from user\nprompt_template: u\n---\n")
    write(project, "rev", "---\ndescription: from project\nprompt_template: p\n---\n")
    bad = write(project, "broken", "no front matter")
    found = scan([(SubagentSource.USER, user), (SubagentSource.PROJECT, project)])
    assert found.types["rev"].description == "from project"
    assert found.types["rev"].source is SubagentSource.PROJECT
    [invalid] = found.invalid
    assert invalid.path == bad
    assert "no front matter" in invalid.reason


def test_missing_roots_are_no_error(tmp_path: Path) -> None:
    assert scan([(SubagentSource.USER, tmp_path / "none")]).types == {}


def test_the_catalog_falls_back_to_general_and_describes_every_type(tmp_path: Path) -> None:
    custom = parse_subagent(SPEC_EXAMPLE, tmp_path, SubagentSource.USER)
    catalog = SubagentCatalog([custom])
    assert catalog.resolve("explore").kind.allowed_tools == EXPLORE_TOOLS
    fallback = catalog.resolve("nope")
    assert (fallback.kind, fallback.fell_back) == (GENERAL, True)
    lines = catalog.describe().splitlines()
    assert [line.split(":")[0] for line in lines] == ["- general", "- explore", "- code-review"]


def test_repair_leaves_rerun_calls_of_the_last_message_pending() -> None:
    old = ToolCall("old", "task", "{}")
    task, read = ToolCall("t", "task", "{}"), ToolCall("r", "read", "{}")
    history = [
        ChatMessage.user("q"),
        ChatMessage(Role.ASSISTANT, tool_calls=(old,)),
        ChatMessage(Role.ASSISTANT, tool_calls=(task, read)),
    ]
    added = repair_dangling_tool_calls(history, rerun=frozenset({"task"}))
    # an earlier message's dangling call is answered; the last one's task is left to run
    assert [m.tool_call_id for m in added] == ["old", "r"]
    assert pending_tool_calls(history + added) == (task,)
    assert pending_tool_calls([*history, *added, ChatMessage.user("next")]) == ()
