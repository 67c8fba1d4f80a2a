"""Sessions survive restarts and are managed with chat commands."""

from __future__ import annotations

from pathlib import Path

from storage.sql.conversations import sessions
from tests.fakes.openai_server import FakeOpenAI
from tests.support import conversation, make_config, running_gateway, ws_client


async def test_restart_keeps_session_and_history(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url)
    llm.add_text("Nice to meet you, Ada.")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert await client.ask("my name is Ada") == "Nice to meet you, Ada."

    llm.add_text("Your name is Ada.")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        listing = await client.ask("/sessions")
        assert "chat-1" in listing
        assert "3 messages" in listing  # AGENT.md, question, answer
        assert await client.ask("what is my name?") == "Your name is Ada."

    history = [(m["role"], m["content"]) for m in conversation(llm.requests[-1])]
    assert history == [
        ("user", "my name is Ada"),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "what is my name?"),
    ]


async def test_session_commands(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.ask("first session message")  # creates session "chat-1"

        assert "Started new session chat-1#2" in await client.ask("/new Research")
        await client.ask("second session message")
        assert len(llm.requests) == 2  # /new dropped the cached history: no stale first try
        listing = await client.ask("/sessions")
        assert '2. chat-1#2 "Research" — 3 messages ← current' in listing
        assert '1. chat-1 "first session message" — 3 messages\n' in listing  # its default title

        assert "Switched to session chat-1." in await client.ask("/use 1")
        assert "Renamed session chat-1" in await client.ask("/rename Intro")
        listing = await client.ask("/sessions")
        assert '1. chat-1 "Intro" — 3 messages ← current' in listing

        # the model sees only the active session's history
        await client.ask("back in the first")
        assert [m["content"] for m in conversation(llm.requests[-1])] == [
            "first session message",
            "echo: first session message",
            "back in the first",
        ]

        reply = await client.ask("/archive")
        assert "Archived session chat-1; now in new session chat-1#3" in reply
        listing = await client.ask("/sessions")
        assert '1. chat-1 "Intro" — 5 messages (archived)\n' in listing
        assert "3. chat-1#3 — 0 messages ← current" in listing

        assert "Deleted session chat-1#2." in await client.ask("/delete 2")
        listing = await client.ask("/sessions")
        assert "Research" not in listing
        assert "No session 'nope'" in await client.ask("/use nope")


async def test_help_lists_commands(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        text = await client.ask("/help")
    for command in ("/new", "/sessions", "/use", "/rename", "/archive", "/delete", "/stop"):
        assert command in text
    assert llm.requests == []  # commands never reach the model


async def test_a_session_changed_behind_the_gateway_is_noticed(home: Path, llm: FakeOpenAI) -> None:
    """The turn after a cached one opens in memory; if the chat's session was
    changed by anything but a command (here: a write straight to storage), the
    turn finds out before storing anything and runs again from storage."""
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("first")
        assert gw.db is not None
        await gw.db.write(
            lambda c: sessions.create_next_session(c, "websocket", "chat-1", "chat-1")
        )
        assert await client.ask("second") == "echo: second"
        rows = await gw.db.read(
            lambda c: c.execute(
                "SELECT session_id, content FROM messages WHERE role IN ('user', 'assistant') "
                "ORDER BY id"
            ).fetchall()
        )
    assert [tuple(r) for r in rows] == [
        ("chat-1", "first"),
        ("chat-1", "echo: first"),
        ("chat-1#2", "second"),
        ("chat-1#2", "echo: second"),
    ]
    assert [m["content"] for m in conversation(llm.requests[-1])] == ["second"]


async def test_a_chats_next_turns_open_from_the_cached_history(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        for text in ("one", "two", "three"):
            await client.ask(text)
        assert gw.sessions is not None
        assert gw.sessions.execution.opener.opened_in_memory == 2  # all but the first
        assert gw.db is not None
        seqs = await gw.db.read(
            lambda c: [r[0] for r in c.execute("SELECT seq FROM messages ORDER BY id")]
        )
    assert seqs == list(range(1, 8))  # AGENT.md, then three questions and answers, in order
    assert [m["content"] for m in conversation(llm.requests[-1])] == [
        "one",
        "echo: one",
        "two",
        "echo: two",
        "three",
    ]


async def test_a_session_archived_by_the_idle_cleanup_is_not_continued(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("first")
        assert gw.db is not None
        # what the scheduler's idle-session cleanup does (storage.sql.conversations.cleanup)
        await gw.db.write(lambda c: c.execute("UPDATE sessions SET status = 'archived'"))
        assert await client.ask("second") == "echo: second"
        rows = await gw.db.read(
            lambda c: c.execute(
                "SELECT session_id, content FROM messages WHERE role = 'user' ORDER BY id"
            ).fetchall()
        )
    assert [tuple(r) for r in rows] == [("chat-1", "first"), ("chat-1#2", "second")]


async def test_deleting_the_current_session_never_hands_its_id_out_again(
    home: Path, llm: FakeOpenAI
) -> None:
    """Deleted ids stay retired: the replacement is numbered above the deleted one."""
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("hello")  # session chat-1
        assert await client.ask("/delete") == "Deleted session chat-1; now in new session chat-1#2."
        await client.ask("hello again")
        reply = await client.ask("/delete")
        assert reply == "Deleted session chat-1#2; now in new session chat-1#3."
        listing = await client.ask("/sessions")
    assert "1. chat-1#3 — 0 messages ← current" in listing
    assert "chat-1 " not in listing
    assert "chat-1#2" not in listing


async def test_sessions_output_is_what_the_readme_shows(home: Path, llm: FakeOpenAI) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    shown = readme.split("`/sessions` answers like this", 1)[1].split("```text\n", 1)[1]
    shown = shown.split("```", 1)[0].strip()
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw, "cli-3f2a9c") as client:
        await client.ask("hello")
        await client.ask("/rename Trip plans")
        await client.ask("/archive")
        await client.ask("hi")
        assert await client.ask("/sessions") == shown
