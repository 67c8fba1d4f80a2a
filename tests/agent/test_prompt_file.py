"""AGENT.md: creation with default content, live edits, and the injection cadence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.messages import ChatMessage, Marker
from agent.prompt_file import (
    DEFAULT_AGENT_PROMPT,
    AgentPromptFile,
    agent_prompt_message,
    needs_injection,
    prompt_text,
)


async def test_load_creates_directory_and_default_file(tmp_path: Path) -> None:
    agent_dir = tmp_path / "home" / ".picobot" / "agent"
    prompt = AgentPromptFile(agent_dir)

    content = await prompt.load()

    assert (agent_dir / "AGENT.md").is_file()
    assert (agent_dir / "AGENT.md").read_text(encoding="utf-8") == DEFAULT_AGENT_PROMPT
    assert content == prompt_text(DEFAULT_AGENT_PROMPT)  # the note is the operator's
    assert "picobot" in content


async def test_ensure_creates_the_file_without_reading_it(tmp_path: Path) -> None:
    prompt = AgentPromptFile(tmp_path / "agent")
    await prompt.ensure()
    assert prompt.path.read_text(encoding="utf-8") == DEFAULT_AGENT_PROMPT


async def test_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "AGENT.md").write_text("You are Ada, a terse assistant.\n", encoding="utf-8")
    prompt = AgentPromptFile(agent_dir)

    await prompt.ensure()

    assert await prompt.load() == "You are Ada, a terse assistant."


async def test_an_edit_is_picked_up_at_the_next_load(tmp_path: Path) -> None:
    prompt = AgentPromptFile(tmp_path / "agent")
    first = await prompt.load()
    prompt.path.write_text("# Persona\nAlways answer in haiku.\n", encoding="utf-8")

    second = await prompt.load()

    assert first == prompt_text(DEFAULT_AGENT_PROMPT)
    assert second == "# Persona\nAlways answer in haiku."


class _CountedReads(AgentPromptFile):
    reads = 0

    def _load_sync(self) -> str:
        self.reads += 1
        return super()._load_sync()


async def test_loads_that_come_together_share_a_read_that_started_after_them(
    tmp_path: Path,
) -> None:
    prompt = _CountedReads(tmp_path / "agent")
    await prompt.load()
    prompt.path.write_text("Answer in haiku.\n", encoding="utf-8")

    texts = await asyncio.gather(*(prompt.load() for _ in range(50)))

    assert set(texts) == {"Answer in haiku."}
    # the first load; then, for all fifty, the read the first of them started
    # (the others came while it ran, so it may predate them) and one after it
    assert prompt.reads == 3


async def test_html_comments_are_notes_for_the_operator_not_the_model(tmp_path: Path) -> None:
    prompt = AgentPromptFile(tmp_path / "agent")
    await prompt.ensure()
    prompt.path.write_text(
        "# Persona\n<!-- reviewed by Ada,\n 2026-11 -->Answer in haiku.<!-- x -->\n",
        encoding="utf-8",
    )
    assert await prompt.load() == "# Persona\nAnswer in haiku."


async def test_a_deleted_file_is_recreated(tmp_path: Path) -> None:
    prompt = AgentPromptFile(tmp_path / "agent")
    await prompt.load()
    prompt.path.unlink()
    assert await prompt.load() == prompt_text(DEFAULT_AGENT_PROMPT)


def test_the_prompt_message_is_a_marked_system_message() -> None:
    message = agent_prompt_message("persona")
    assert message.role == "system"
    assert message.marker == Marker.AGENT_PROMPT
    assert message.content == "persona"


def _history_with_prompt() -> list[ChatMessage]:
    return [agent_prompt_message("persona"), ChatMessage.user("hi")]


def test_an_empty_history_needs_the_prompt_even_with_reinjection_off() -> None:
    assert needs_injection([], user_turns=0, last_injected_turn=None, every=100)
    assert needs_injection([], user_turns=0, last_injected_turn=None, every=0)


def test_a_freshly_reset_history_needs_the_prompt_again() -> None:
    # After a reset the session's counters carry on but the new segment is empty
    # (or holds only messages that are not the agent prompt).
    assert needs_injection([], user_turns=42, last_injected_turn=1, every=100)
    scheduled = [ChatMessage.system("job rules", marker=Marker.SCHEDULED_SYSTEM_PROMPT)]
    assert needs_injection(scheduled, user_turns=42, last_injected_turn=1, every=100)


def test_no_reinjection_before_every_user_turns_have_passed() -> None:
    history = _history_with_prompt()
    # injected before turn 1; the message about to arrive is turn user_turns + 1
    assert not needs_injection(history, user_turns=1, last_injected_turn=1, every=100)
    assert not needs_injection(history, user_turns=99, last_injected_turn=1, every=100)
    assert needs_injection(history, user_turns=100, last_injected_turn=1, every=100)
    assert not needs_injection(history, user_turns=150, last_injected_turn=101, every=100)
    assert needs_injection(history, user_turns=200, last_injected_turn=101, every=100)


def test_zero_disables_periodic_reinjection() -> None:
    history = _history_with_prompt()
    assert not needs_injection(history, user_turns=10_000, last_injected_turn=1, every=0)


def test_negative_cadence_is_rejected() -> None:
    with pytest.raises(ValueError, match="every"):
        needs_injection([], user_turns=0, last_injected_turn=None, every=-1)


def _simulate(every: int, turns: int) -> list[int]:
    """Run `turns` user turns the way the execution service would (counters kept
    as storage keeps them); return the numbers of the turns the prompt preceded."""
    history: list[ChatMessage] = []
    user_turns = 0  # sessions.user_turns
    prompt_turn: int | None = None  # sessions.prompt_turn
    injected_before: list[int] = []
    while user_turns < turns:
        inject = needs_injection(history, user_turns, prompt_turn, every)
        if inject:
            history.append(agent_prompt_message("persona"))
        history.append(ChatMessage.user(f"message {user_turns + 1}"))
        user_turns += 1  # stored together with the prompt, in one append
        if inject:
            prompt_turn = user_turns
            injected_before.append(user_turns)
    return injected_before


def test_cadence_over_a_long_conversation() -> None:
    assert _simulate(every=100, turns=250) == [1, 101, 201]
    assert _simulate(every=3, turns=7) == [1, 4, 7]
    assert _simulate(every=0, turns=250) == [1]


# words a persona might use for a capability → the tools that provide it
_CAPABILITIES = {
    "memory": {"memory_search", "memory_manage"},
    "remember": {"memory_search", "memory_manage"},
    "skill": {"skill_activate", "skill_manage"},
    "sub-agent": {"task"},
    "subagent": {"task"},
    "schedul": {"scheduler_manage"},
    "remind": {"scheduler_manage"},
    "shell": {"bash"},
    "web": {"web_fetch", "http_request"},
    "file": {"read", "write", "edit"},
    "mcp": set(),
}


def test_default_agent_prompt_promises_only_tools_that_exist(tmp_path: Path) -> None:
    from agent.tools.base import ToolSettings
    from agent.tools.builtin import build_registry

    registry = build_registry(ToolSettings(workspace=tmp_path), "UTC")
    names = set(registry.names()) | {"scheduler_manage"}  # the gateway registers it
    text = DEFAULT_AGENT_PROMPT.lower()
    promised = {word for word, tools in _CAPABILITIES.items() if word in text}
    missing = {word for word in promised if not _CAPABILITIES[word] & names}
    assert not missing, f"AGENT.md promises {missing} but no such tool exists"
