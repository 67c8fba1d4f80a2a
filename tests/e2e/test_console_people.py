"""The console's people view through its API (gateway/console/people.py)
against a real gateway: a turn held for an approval carries on once the
console answers it, a pairing code approved there lets the sender in and a
revocation shuts them out, and a user's memories are searched, one deleted,
then all forgotten; what the API shows and what it changed are checked
against the database each time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.i18n import Locale, Msg, tr
from storage.sql.access.pairings import PairingState
from storage.sql.approvals import ApprovalState
from storage.sql.memory.memories import Provenance, Scope
from storage.store import Store
from tests.e2e.test_access import CODE, access_config, asked, replies, say, texts_to
from tests.e2e.test_approvals import MARK, approval_config, next_text
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, newest, running_gateway, wait_until, ws_client

STRANGER, FAMILY = 42, 7
ALICE = Scope("user", "websocket:alice")
BOB = Scope("user", "telegram:9")
SOURCE = Provenance("agent")


class Ops:
    """The console's API as the page calls it (a loopback gateway without
    tokens: the operator)."""

    def __init__(self, http: aiohttp.ClientSession, gw: Gateway) -> None:
        self.http = http
        self.base = gw.base_url + "/api/ops"

    async def call(
        self, method: str, path: str, status: int = 200, **kwargs: Any
    ) -> dict[str, Any]:
        async with self.http.request(method, self.base + path, **kwargs) as response:
            data: dict[str, Any] = await response.json()
            assert response.status == status, (method, path, response.status, data)
            return data


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def store_of(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


async def test_a_held_turn_carries_on_when_the_console_answers(
    home: Path, llm: FakeOpenAI, http: aiohttp.ClientSession
) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Done: the file is there.")
    llm.add_tool_call("bash", {"command": "rm -rf build"})
    llm.add_text("All right, I left it.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        ops, store = Ops(http, gw), store_of(gw)
        assert (await ops.call("GET", "/approvals"))["approvals"] == []
        await client.send("make the file")
        assert MARK in await next_text(client)  # the chat's request
        [shown] = (await ops.call("GET", "/approvals"))["approvals"]
        record = await store.approvals.get(shown["id"])
        assert record is not None
        assert record.state is ApprovalState.PENDING
        assert shown["chat"] == f"websocket:{record.chat_id}" == "websocket:chat-1"
        assert shown["asked_by"] == f"websocket:{record.requester}"
        assert shown["session_id"] == record.session_id
        assert shown["calls"] == [{"name": "bash", "shown": MARK}]
        assert datetime.fromisoformat(shown["expires_at"]) == record.expires_at

        await ops.call("POST", "/approvals/999/approve", 404)
        answer = await ops.call("POST", f"/approvals/{record.id}/approve")
        assert answer == {"id": record.id, "decision": "approve", "decided_by": "console:operator"}
        assert await next_text(client) == "Done: the file is there."  # the turn finished
        await ops.call("POST", f"/approvals/{record.id}/deny", 409)  # answered already
        decided = await store.approvals.get(record.id)
        assert decided is not None
        assert (decided.approved, decided.decided_by) == (True, "console:operator")
        await wait_until(lambda: _state(store, record.id, ApprovalState.DONE))
        assert (home / "workspace" / "approved.txt").exists()
        assert "denied" not in newest(llm.requests[1])["content"]
        assert (await ops.call("GET", "/approvals"))["approvals"] == []

        await client.send("clean the build")
        await next_text(client)
        [second] = (await ops.call("GET", "/approvals"))["approvals"]
        await ops.call("POST", f"/approvals/{second['id']}/deny", 400, json={"reason": 7})
        await ops.call("POST", f"/approvals/{second['id']}/deny", json={"reason": "not now"})
        assert await next_text(client) == "All right, I left it."
        denied = await store.approvals.get(second["id"])
        assert denied is not None
        assert (denied.approved, denied.reason, denied.decided_by) == (
            False,
            "not now",
            "console:operator",
        )
    assert newest(llm.requests[3])["content"] == "[denied by user: not now]"


async def _state(store: Store, approval_id: int, state: ApprovalState) -> bool:
    record = await store.approvals.get(approval_id)
    return record is not None and record.state is state


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


async def test_a_code_approved_in_the_console_lets_the_sender_in_until_revoked(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, http: aiohttp.ClientSession
) -> None:
    clock = Clock()
    async with running_gateway(access_config(home, llm, tg, pairing=True), clock=clock) as gw:
        ops, store = Ops(http, gw), store_of(gw)
        await say(tg, STRANGER, "hello, I'm new here")
        [offer] = await replies(tg, STRANGER, 1)
        match = CODE.search(offer)
        assert match is not None, offer
        code = match.group(1)
        listed = await ops.call("GET", "/pairings")
        [stored] = await store.list_pairings(clock())
        assert listed["approved"] == []
        assert [(p["who"], p["code"], p["state"], p["chat_id"]) for p in listed["pending"]] == [
            (stored.who, stored.code, "pending", stored.chat_id)
        ]
        assert stored.who == "telegram:42"
        assert stored.code == code

        await ops.call("POST", "/pairings/not-a-code/approve", 400)
        wrong = code[:-1] + ("B" if code[-1] == "A" else "A")
        await ops.call("POST", f"/pairings/{wrong}/approve", 404)
        approved = await ops.call("POST", f"/pairings/{code.lower()}/approve")
        assert approved["approved"]["who"] == "telegram:42"
        await ops.call("POST", f"/pairings/{code}/approve", 409)
        pairing = await store.pairing_of("telegram", str(STRANGER), clock())
        assert pairing is not None
        assert (pairing.state, pairing.approved_by) == (PairingState.APPROVED, "console:operator")
        # the new user is told in their own chat, as after /pair approve
        assert (await replies(tg, STRANGER, 2))[1] == tr(Locale.EN, Msg.APPROVED_NOTICE)
        await say(tg, STRANGER, "what can you do?")
        assert (await replies(tg, STRANGER, 3))[2] == "echo: what can you do?"
        listed = await ops.call("GET", "/pairings")
        assert listed["pending"] == []
        assert [(p["who"], p["approved_by"], p["code"]) for p in listed["approved"]] == [
            ("telegram:42", "console:operator", None)
        ]

        await ops.call("POST", "/pairings/telegram/42/revoke")
        await ops.call("POST", "/pairings/telegram/42/revoke", 404)
        states = await store.db.read(
            lambda c: c.execute("SELECT state FROM pairings ORDER BY id").fetchall()
        )
        assert [r["state"] for r in states] == ["revoked"]
        assert (await ops.call("GET", "/pairings")) == {"pending": [], "approved": [], "limit": 200}
        await say(tg, STRANGER, "and now?")
        await say(tg, FAMILY, "marker")  # allow_from: answered after the stranger was judged
        await replies(tg, FAMILY, 1)
    assert asked(llm) == ["what can you do?", "marker"]
    assert len(texts_to(tg, STRANGER)) == 3  # "and now?" got no answer


async def test_a_users_memories_are_searched_deleted_and_forgotten(
    home: Path, llm: FakeOpenAI, http: aiohttp.ClientSession
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        ops, memories = Ops(http, gw), store_of(gw).memories
        for key, content in [
            ("coffee", "Drinks oat milk flat white"),
            ("tea", "喜欢喝普洱茶，不喝咖啡"),
            ("api", "Their key is sk-proj-abcdefghijklmnop"),
        ]:
            await memories.put(ALICE, "preferences", key, content, SOURCE, cap=None)
        await memories.put(BOB, "profile", "pet", "Has a cat", SOURCE, cap=None)

        users = (await ops.call("GET", "/memories"))["users"]
        assert users == [
            {"user": i.scope.key, "entries": i.entries, "summary": False}
            for i in await memories.scopes()
        ]
        assert [u["user"] for u in users] == ["telegram:9", "websocket:alice"]

        every = await ops.call("GET", "/memories/websocket:alice")
        rows = await memories.entries(ALICE, None)
        assert [(e["namespace"], e["key"]) for e in every["entries"]] == [
            (r.namespace, r.memory_key) for r in rows
        ]
        shown = {e["key"]: e["content"] for e in every["entries"]}
        assert shown["tea"] == "喜欢喝普洱茶，不喝咖啡"
        assert "abcdefghijklmnop" not in shown["api"]  # a secret stays masked

        found = await ops.call("GET", "/memories/websocket:alice", params={"q": "flat white"})
        expected = await memories.search(ALICE, "flat white", None, 50)
        assert [e["key"] for e in found["entries"]] == [r.memory_key for r in expected]
        assert found["entries"][0]["key"] == "coffee"
        assert found["query"] == "flat white"

        await ops.call("DELETE", "/memories/websocket:alice/preferences/coffee")
        assert await memories.get(ALICE, "preferences", "coffee") is None
        await ops.call("DELETE", "/memories/websocket:alice/preferences/coffee", 404)
        after = await ops.call("GET", "/memories/websocket:alice", params={"q": "flat white"})
        assert "coffee" not in [e["key"] for e in after["entries"]]
        await ops.call("GET", "/memories/nobody", 400)

        forgot = await ops.call("DELETE", "/memories/websocket:alice")
        assert forgot == {"user": "websocket:alice", "forgotten": 2}
        assert await memories.entries(ALICE, None) == []
        await ops.call("DELETE", "/memories/websocket:alice", 404)
        assert [e.memory_key for e in await memories.entries(BOB, None)] == ["pet"]
        users = (await ops.call("GET", "/memories"))["users"]
        assert [u["user"] for u in users] == ["telegram:9"]
