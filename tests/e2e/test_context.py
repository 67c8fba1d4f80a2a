"""AGENT.md injection and history compaction through the WebSocket channel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.compaction_prompt import SUMMARY_SYSTEM_PROMPT
from agent.prompt_file import DEFAULT_AGENT_PROMPT, prompt_text
from gateway.app import Gateway
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import make_config, running_gateway, ws_client


def _is_summary(body: dict[str, Any]) -> bool:
    return "tools" not in body


def _turn_requests(llm: FakeOpenAI) -> list[dict[str, Any]]:
    return [b for b in llm.requests if not _is_summary(b)]


def _system_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "system"]


async def test_agent_prompt_injected_first_and_reinjected_after_edit(
    home: Path, llm: FakeOpenAI
) -> None:
    # no skill index: this test reads every system message of the requests
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"agent_prompt_reinject_every": 2},
        skills={"enabled": False},
    )
    prompt_path = home / "agent" / "AGENT.md"
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert prompt_path.read_text() == DEFAULT_AGENT_PROMPT  # created on start
        await client.ask("one")
        first = llm.requests[-1]["messages"]
        assert first[0]["role"] == "system"
        assert first[0]["content"] == prompt_text(DEFAULT_AGENT_PROMPT)
        assert first[1] == {"role": "user", "content": "one"}

        prompt_path.write_text("You are Pico, a terse assistant.")  # live edit, no restart
        await client.ask("two")
        assert _system_texts(llm.requests[-1]) == [prompt_text(DEFAULT_AGENT_PROMPT)]  # not yet
        await client.ask("three")  # two user turns since the injection: re-injected now
        messages = llm.requests[-1]["messages"]
        assert _system_texts(llm.requests[-1]) == [
            prompt_text(DEFAULT_AGENT_PROMPT),
            "You are Pico, a terse assistant.",
        ]
        assert messages[-2] == {"role": "system", "content": "You are Pico, a terse assistant."}
        assert messages[-1] == {"role": "user", "content": "three"}


async def _long_turns(client: Any, n: int, size: int = 1200) -> None:
    for i in range(n):
        await client.ask(f"turn {i} " + "x" * size)


def _config(home: Path, llm: FakeOpenAI, **gateway: Any) -> Any:
    return make_config(
        home,
        llm.base_url,
        models={"default": {"model_id": "fake-model", "context_window_tokens": 4000}},
        agents={"default": {"compaction": {"keep_user_turns": 2}}},
        gateway={"agent_prompt_reinject_every": 0, **gateway},
    )


async def test_compact_and_status_commands(home: Path, llm: FakeOpenAI) -> None:
    async def summarise(body: dict[str, Any]) -> Reply | None:
        return Reply(text="User sent turns 0-2 of x padding.") if _is_summary(body) else None

    llm.responder = summarise
    loaded = make_config(
        home, llm.base_url, agents={"default": {"compaction": {"keep_user_turns": 1}}}
    )
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await _long_turns(client, 3, size=100)
        status = await client.ask("/status")
        assert "Messages in the active history: 7 (segment 0)" in status
        assert "Estimated context:" in status
        assert "Last compaction: never" in status

        reply = await client.ask("/compact")
        assert reply.startswith("Compacted: about")
        summary_request = next(b for b in llm.requests if _is_summary(b))
        assert summary_request["messages"][0]["content"] == SUMMARY_SYSTEM_PROMPT
        transcript = summary_request["messages"][1]["content"]
        assert "turn 0" in transcript
        assert "turn 1" in transcript
        assert "turn 2" not in transcript  # the kept turn is not summarised

        status = await client.ask("/status")
        assert "(segment 1)" in status
        assert "Last compaction: never" not in status

        turns_before = sum(1 for b in llm.requests if not _is_summary(b))
        await client.ask("after")
        # one model call: the compacted history was read, not a stale cached one
        assert sum(1 for b in llm.requests if not _is_summary(b)) == turns_before + 1
        sent = llm.requests[-1]["messages"]
        assert sent[0]["content"] == prompt_text(DEFAULT_AGENT_PROMPT)
        assert sent[1]["role"] == "system"
        assert sent[1]["content"].startswith("[Compressed History]")
        assert "User sent turns 0-2" in sent[1]["content"]
        assert [m["content"][:6] for m in sent[2:] if m["role"] == "user"] == ["turn 2", "after"]
    async with Database(loaded.storage_path) as db:
        archived = await db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM messages WHERE segment = 0").fetchone()[0]
        )
    assert archived == 7  # the originals stay, archived


async def _compactions_done(gw: Gateway) -> None:
    assert gw.compactor is not None
    await asyncio.wait_for(gw.compactor.drained(), 10)


async def test_background_compaction_does_not_block_a_reply(home: Path, llm: FakeOpenAI) -> None:
    summary_gate = asyncio.Event()
    summary_started = asyncio.Event()

    async def responder(body: dict[str, Any]) -> Reply | None:
        if not _is_summary(body):
            return None
        summary_started.set()
        await summary_gate.wait()
        return Reply(text="SUMMARY of the early turns.")

    llm.responder = responder
    async with running_gateway(_config(home, llm)) as gw, ws_client(gw) as client:
        # ~2,400 characters a turn: the history passes the trigger (50% of 4,000
        # tokens) within these turns and compaction starts in the background;
        # the summary is held, yet every turn is still answered
        await _long_turns(client, 6)
        await asyncio.wait_for(summary_started.wait(), 10)
        # the summary is still being written: a new message is answered meanwhile
        assert await client.ask("during compaction") == "echo: during compaction"
        summary_gate.set()
        await _compactions_done(gw)
        await client.ask("after compaction")
        sent = _turn_requests(llm)[-1]["messages"]
        assert sent[1]["content"].startswith("[Compressed History]")
        assert "SUMMARY of the early turns." in sent[1]["content"]
        users = [m["content"] for m in sent if m["role"] == "user"]
        # the turn answered during compaction was carried into the new segment, in order
        assert users[-2:] == ["during compaction", "after compaction"]
        assert all(m["role"] != "tool" for m in sent)  # no orphaned tool results


async def test_failed_summary_falls_back_to_truncation(home: Path, llm: FakeOpenAI) -> None:
    async def responder(body: dict[str, Any]) -> Reply | None:
        return Reply(status=500) if _is_summary(body) else None

    llm.responder = responder
    async with running_gateway(_config(home, llm)) as gw, ws_client(gw) as client:
        await _long_turns(client, 6)
        await _compactions_done(gw)
        await client.ask("next")
        summary = _turn_requests(llm)[-1]["messages"][1]["content"]
        assert summary.startswith("[Compressed History]")
        assert "turn 0" in summary  # the transcript itself, truncated
