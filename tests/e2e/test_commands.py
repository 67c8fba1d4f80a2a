"""Commands run off the ingest path: a slow command holds up neither another
chat's ack nor its reply, and a chat's own messages stay behind its commands."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

from agent.messages import ChatMessage, Role
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from storage.sql.conversations import messages, sessions
from storage.sqlite.db import Connection, Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, ws_client


class GatedCommands(CommandRegistry):
    """The real registry, with one built-in command made to wait at a gate
    before its real handler runs: the test decides when it may go on."""

    def __init__(self, gated: str) -> None:
        super().__init__()
        self.gated = gated
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    def add(self, command: Command) -> None:
        if command.name == self.gated:
            command = dataclasses.replace(command, handler=self._hold(command.handler))
        super().add(command)

    def _hold(
        self, handler: Callable[[CommandCall], Awaitable[CommandReply]]
    ) -> Callable[[CommandCall], Awaitable[CommandReply]]:
        async def held(call: CommandCall) -> CommandReply:
            self.entered.set()
            await self.gate.wait()
            return await handler(call)

        return held


async def _big_session(db_path: Path, chat_id: str, count: int) -> None:
    async with Database(db_path) as db:

        def fill(c: Connection) -> None:
            sessions.create_session(c, "websocket", chat_id, chat_id)
            history = [
                ChatMessage(Role.USER if n % 2 == 0 else Role.ASSISTANT, f"message {n}")
                for n in range(count)
            ]
            messages.append_messages(c, chat_id, history)

        await db.write(fill)


async def test_status_of_a_huge_session_delays_no_other_chat(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url)
    await _big_session(loaded.storage_path, "big", 50_000)
    commands = GatedCommands("status")
    async with running_gateway(loaded, commands=commands) as gw, ws_client(gw, "big") as big:
        status_id = await big.send("/status")
        assert (await big.recv_type("ack"))["id"] == status_id
        await asyncio.wait_for(commands.entered.wait(), 10)
        # /status is running (held at the gate): 20 other chats are acked and answered
        for n in range(20):
            async with ws_client(gw, f"other-{n}") as other:
                assert await other.ask(f"hello {n}") == f"echo: hello {n}"
        assert not commands.gate.is_set()
        commands.gate.set()
        reply = await big.recv_type("message", timeout=20)
    assert reply["reply_to"] == status_id
    assert "Messages in the active history: 50000 (segment 0)" in reply["text"]
    assert "User turns: 25000" in reply["text"]


async def test_a_message_behind_a_command_waits_for_it(home: Path, llm: FakeOpenAI) -> None:
    """'/new' then 'hello' sent at once: 'hello' goes to the new session."""
    commands = GatedCommands("new")
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded, commands=commands) as gw, ws_client(gw, "c") as client:
        assert await client.ask("first") == "echo: first"
        new_id = await client.send("/new")
        assert (await client.recv_type("ack"))["id"] == new_id
        await asyncio.wait_for(commands.entered.wait(), 10)
        hello_id = await client.send("hello")
        assert (await client.recv_type("ack"))["id"] == hello_id
        assert len(llm.requests) == 1  # 'hello' has not reached a turn yet
        commands.gate.set()
        started = await client.recv_type("message")
        assert started["text"].startswith("Started new session c#2")
        answer = await client.recv_type("message")
        assert (answer["reply_to"], answer["text"]) == (hello_id, "echo: hello")
    assert [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"] == ["hello"]
