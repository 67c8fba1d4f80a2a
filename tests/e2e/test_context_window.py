"""A context that can never overflow: a refused request is compacted and sent
once more, and a session far larger than the window still gets its answer.

Through the WebSocket channel, the real OpenAIProvider and the fake OpenAI
server (which answers 413 where told to, as a service's body limit would).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.messages import ChatMessage, Role, tokens_for_chars
from gateway.app import Gateway
from storage.sql.conversations import messages, sessions
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import make_config, running_gateway, ws_client

WINDOW = 4_000  # tokens


def _is_summary(body: dict[str, Any]) -> bool:
    return "tools" not in body


def _turns(llm: FakeOpenAI) -> list[dict[str, Any]]:
    return [b for b in llm.requests if not _is_summary(b)]


def _request_tokens(body: dict[str, Any]) -> int:
    chars = sum(len(m.get("content") or "") for m in body["messages"])
    return tokens_for_chars(chars)


def _config(home: Path, llm: FakeOpenAI, **agent: Any) -> Any:
    return make_config(
        home,
        llm.base_url,
        models={"default": {"model_id": "fake-model", "context_window_tokens": WINDOW}},
        agents={"default": {"compaction": {"keep_user_turns": 1}, **agent}},
        gateway={"agent_prompt_reinject_every": 0},
        skills={"enabled": False},
    )


async def _committed(gw: Gateway, count: int = 1) -> None:
    """`count` compactions committed (the reply may come before the turn offers one)."""
    assert gw.compactor is not None
    await asyncio.wait_for(gw.compactor.committed(count), 10)


async def _active_segment(loaded: Any, session_id: str = "chat-1") -> int:
    async with Database(loaded.storage_path) as db:
        record = await db.read(lambda c: sessions.get_session(c, session_id))
    assert record is not None
    return record.segment


async def test_a_request_refused_as_too_long_is_compacted_and_sent_once_more(
    home: Path, llm: FakeOpenAI
) -> None:
    refused: list[dict[str, Any]] = []

    async def responder(body: dict[str, Any]) -> Reply | None:
        if _is_summary(body):
            return Reply(text="SUMMARY: the user sent turns 0 to 2.")
        last = body["messages"][-1]["content"]
        if last == "too long now" and not refused:
            refused.append(body)
            return Reply(status=413, body={"error": {"message": "request entity too large"}})
        return None

    llm.responder = responder
    loaded = _config(home, llm)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        for i in range(3):  # below the compaction trigger: no background compaction
            text = f"turn {i} " + "x" * 300
            assert await client.ask(text) == f"echo: {text}"
        assert not gw.compactor or gw.compactor.completed == 0
        assert await client.ask("too long now") == "echo: too long now"
        await _committed(gw)
        requests = llm.requests
        assert len(refused) == 1
        at = next(i for i, b in enumerate(requests) if b is refused[0])
        # the refused request, then the summary, then one retry, which was answered
        assert _is_summary(requests[at + 1])
        retry = requests[at + 2]
        assert not _is_summary(retry)
        assert retry["messages"][-1]["content"] == "too long now"
        assert any("SUMMARY: the user sent" in (m["content"] or "") for m in retry["messages"])
        assert not any((m["content"] or "").startswith("turn 0") for m in retry["messages"])
        assert len(requests) == at + 3  # exactly one retry
        # the compaction made in the turn was committed: later turns start from it
        assert await _active_segment(loaded) == 1
        await client.ask("after")
        sent = _turns(llm)[-1]["messages"]
        assert sent[1]["content"].startswith("[Compressed History]")
        users = [m["content"] for m in sent if m["role"] == "user"]
        assert users == ["too long now", "after"]


async def test_a_refusal_with_nothing_to_fold_is_trimmed_and_retried_once(
    home: Path, llm: FakeOpenAI
) -> None:
    async def responder(body: dict[str, Any]) -> Reply | None:
        if not _is_summary(body) and len(_turns(llm)) == 1:
            return Reply(status=400, body={"error": {"code": "context_length_exceeded"}})
        return None

    llm.responder = responder
    async with running_gateway(_config(home, llm)) as gw, ws_client(gw) as client:
        assert await client.ask("first") == "echo: first"
        assert len(_turns(llm)) == 2  # refused, then retried once
        assert not any(_is_summary(b) for b in llm.requests)  # one user turn: nothing to fold


async def test_a_second_refusal_fails_the_turn_and_the_next_turn_still_runs(
    home: Path, llm: FakeOpenAI
) -> None:
    async def responder(body: dict[str, Any]) -> Reply | None:
        if not _is_summary(body) and body["messages"][-1]["content"] == "huge":
            return Reply(status=413)
        return None

    llm.responder = responder
    async with running_gateway(_config(home, llm)) as gw, ws_client(gw) as client:
        failed = await client.ask("huge")
        assert "could not answer" in failed
        assert len(_turns(llm)) == 2  # one retry, no loop
        assert await client.ask("small") == "echo: small"


def _fill(conn: Any, count: int) -> None:
    """A session of `count` messages, stored through the storage layer."""
    sessions.create_session(conn, "websocket", "chat-1", "chat-1")
    batch: list[ChatMessage] = []
    for i in range(count // 2):
        batch.append(ChatMessage.user(f"question {i} " + "q" * 40))
        batch.append(ChatMessage(Role.ASSISTANT, f"answer {i} " + "a" * 40))
        if len(batch) >= 2_000:
            messages.append_messages(conn, "chat-1", batch)
            batch = []
    messages.append_messages(conn, "chat-1", batch)


async def test_a_session_far_larger_than_the_window_gets_its_answer(
    home: Path, llm: FakeOpenAI
) -> None:
    async def responder(body: dict[str, Any]) -> Reply | None:
        return Reply(text="SUMMARY of a long chat.") if _is_summary(body) else None

    llm.responder = responder
    loaded = _config(home, llm)
    async with Database(loaded.storage_path) as db:
        await db.write(lambda c: _fill(c, 20_000))  # ~1 M characters, ~75x the window
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert await client.ask("still there?") == "echo: still there?"
        first = _turns(llm)[0]
        assert _request_tokens(first) <= WINDOW
        assert first["messages"][-1]["content"] == "still there?"
        # the newest turns (AGENT.md, never injected in this session, before the question)
        assert "answer 9999 " in first["messages"][-3]["content"]
        assert len(first["messages"]) < 200  # a tail of the segment, not all of it
        await _committed(gw)  # the turn's size said it was over the trigger: compacted
        assert await _active_segment(loaded) == 1
        assert await client.ask("and now?") == "echo: and now?"
        later = _turns(llm)[-1]
        assert _request_tokens(later) <= WINDOW // 2
        assert later["messages"][1]["content"].startswith("[Compressed History]")


async def test_short_turns_never_read_the_history_for_compaction(
    home: Path, llm: FakeOpenAI
) -> None:
    """The decision is made from the size the turn kept: below the trigger no
    compaction job (each of which reads the whole history) is even queued."""
    async with running_gateway(_config(home, llm)) as gw, ws_client(gw) as client:
        for i in range(5):
            await client.ask(f"short {i}")
        assert gw.compactor is not None
        assert gw.compactor.queued == 0
        for i in range(8):  # ~2,400 characters a turn: past the trigger (2,000 tokens)
            await client.ask(f"long {i} " + "y" * 2_400)
        await _committed(gw)
        assert gw.compactor.queued >= 1
