"""The crash test on each backend (issue 53): a real `picobot gateway` SIGKILLed
five times with turns in flight, started again on the same database each time,
while twenty WebSocket chats send 200 messages; every message is answered
exactly once, as the clients saw it and as the database holds it."""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websockets

from storage.backends import open_database
from storage.database import Connection
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import storage_backends
from tests.support import GatewayProcess, child_env, process_config, spawn_gateway, wait_until

pytestmark = pytest.mark.slow

CHATS = 20
PER_CHAT = 10  # 200 messages in all
# LLM requests of each gateway's life before it is killed: varied, so the kills
# land at different points of the run (every one with turns waiting on the LLM)
KILL_AFTER_REQUESTS = (7, 23, 41, 3, 30)


class Generation:
    """The gateway now running; chats wait here for the next one after a kill."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.gw = gw
        self.all = [gw]
        self.number = 0
        self._changed = asyncio.Condition()

    async def replace(self, gw: GatewayProcess) -> None:
        async with self._changed:
            self.gw, self.number = gw, self.number + 1
            self.all.append(gw)
            self._changed.notify_all()

    async def after(self, number: int) -> tuple[int, str]:
        """The first gateway newer than `number`: its number and WebSocket URL."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.number > number)
            return self.number, self.gw.ws_url


@dataclass
class Chat:
    """One user who sends a message, waits for its answer, then sends the next,
    reconnecting whenever the gateway dies; a message whose ack may not have
    arrived is sent again with the same id (the gateway knows it as a duplicate).
    Replies are told apart by their outbox `id`, as docs/PROTOCOL.md asks of a
    client: one sent just before a kill may come again after the restart."""

    chat_id: str
    # reply_to -> {outbox id: text}: more than one id would be a second answer
    replies: dict[str, dict[int, str]] = field(default_factory=dict)
    duplicates: int = 0  # acks saying "duplicate": the resent message was recorded

    def text_of(self, n: int) -> str:
        return f"{self.chat_id} says {n}"

    async def run(self, generation: Generation) -> None:
        number, url = generation.number, generation.gw.ws_url
        n = 0
        while n < PER_CHAT:
            try:
                n = await self._session(url, n)
            except (OSError, websockets.ConnectionClosed, websockets.InvalidHandshake):
                number, url = await generation.after(number)

    async def _session(self, url: str, n: int) -> int:
        """Send from message `n` on, over one connection, until all are
        answered (returns PER_CHAT) or the connection dies (raises)."""
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": self.chat_id}))
            assert json.loads(await ws.recv())["type"] == "welcome"
            while n < PER_CHAT:
                msg_id = f"m{n}"
                frame = {"type": "message", "id": msg_id, "text": self.text_of(n)}
                await ws.send(json.dumps(frame))
                while msg_id not in self.replies:
                    self._take(json.loads(await ws.recv()), msg_id)
                n += 1
            return n

    def _take(self, frame: dict[str, Any], msg_id: str) -> None:
        if frame["type"] == "ack" and frame["id"] == msg_id:
            assert frame["status"] in ("accepted", "duplicate"), frame
            self.duplicates += frame["status"] == "duplicate"
        elif frame["type"] == "message":
            answers = self.replies.setdefault(frame["reply_to"], {})
            assert answers.get(frame["id"], frame["text"]) == frame["text"], frame
            answers[frame["id"]] = frame["text"]


async def _database_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    queries = {
        "inbox": "SELECT i.state, COUNT(o.id), MIN(o.state) FROM inbox i "
        "LEFT JOIN outbox o ON o.inbox_id = i.id GROUP BY i.id",
        "outbox": "SELECT state, COUNT(*) FROM outbox GROUP BY state",
        "messages": "SELECT session_id, role, COUNT(*) FROM messages "
        "WHERE role IN ('user', 'assistant') GROUP BY session_id, role",
    }

    def all_of(c: Connection) -> dict[str, list[tuple[Any, ...]]]:
        return {name: [tuple(r) for r in c.execute(sql)] for name, sql in queries.items()}

    db = open_database(url)
    await db.open()
    try:
        return await db.read(all_of)
    finally:
        await db.close()


async def _kill_and_restart(
    generation: Generation, llm: FakeOpenAI, after: int, start: tuple[Any, ...]
) -> None:
    """Once the running gateway made `after` LLM requests (they are in flight:
    the fake LLM is slow), SIGKILL it and start the next on the same database."""
    first = len(llm.requests)
    await wait_until(lambda: len(llm.requests) >= first + after, timeout=60)
    assert await generation.gw.stop(signal.SIGKILL) == -signal.SIGKILL
    await generation.replace(await spawn_gateway(*start))


@storage_backends
async def test_five_sigkills_amid_200_messages_answer_each_exactly_once(
    home: Path, llm: FakeOpenAI, storage_url: str
) -> None:
    llm.delay = 0.3
    config = process_config(llm.base_url, storage={"url": storage_url})
    start = (config, home, child_env(home))
    generation = Generation(await spawn_gateway(*start))
    chats = [Chat(f"chat-{i}") for i in range(CHATS)]
    runs = [asyncio.create_task(chat.run(generation)) for chat in chats]
    try:
        for after in KILL_AFTER_REQUESTS:
            await _kill_and_restart(generation, llm, after, start)
        async with asyncio.timeout(120):
            await asyncio.gather(*runs)
    finally:
        for task in runs:
            task.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        assert await generation.gw.stop() == 0
    assert generation.number == len(KILL_AFTER_REQUESTS)

    for chat in chats:
        answers = {reply_to: list(by_id.values()) for reply_to, by_id in chat.replies.items()}
        assert answers == {f"m{n}": [f"echo: {chat.text_of(n)}"] for n in range(PER_CHAT)}, (
            chat.chat_id
        )
    assert sum(chat.duplicates for chat in chats) >= 1  # some kills hit recorded messages
    # the kills landed mid-turn: the gateways after them found turns to finish
    recovered = [e["rows"] for gw in generation.all[1:] for e in gw.events("inbox_recovered")]
    assert sum(recovered) >= 1

    rows = await _database_rows(storage_url)
    assert len(rows["inbox"]) == CHATS * PER_CHAT
    assert set(rows["inbox"]) == {("done", 1, "sent")}  # one reply per message, each sent
    assert rows["outbox"] == [("sent", CHATS * PER_CHAT)]
    assert sorted(rows["messages"]) == sorted(
        (chat.chat_id, role, PER_CHAT) for chat in chats for role in ("assistant", "user")
    )
