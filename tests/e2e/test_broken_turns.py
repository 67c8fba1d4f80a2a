"""A turn that breaks outside the agent loop (gateway.turns.execution `_broken`).

On what nothing foresaw (here a stored row that no longer reads, as a hand
edit or a newer picobot might leave it) the asker is told as of a failed
turn and the inbox row is closed: not left unanswered until a restart, only
to break the same way then. When storage itself fails, the turn is a crash
as before: no answer, and recovery at the next start carries it out once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.app import Gateway
from gateway.bus import OutboundMessage
from gateway.i18n import Locale, Msg, tr
from storage.store import Store
from tests.e2e.test_approval_outcomes import logged
from tests.e2e.test_approvals import ASK, MARK, approval_config, next_text
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, newest, running_gateway, ws_client

CHAT = "broken-chat"


def store_of(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


async def outbox_texts(gw: Gateway, text: str) -> int:
    rows = await store_of(gw).db.read(
        lambda c: c.execute("SELECT count(*) FROM outbox WHERE text = ?", (text,)).fetchone()
    )
    return int(rows[0])


async def unfinished(gw: Gateway) -> list[str]:
    rows = await store_of(gw).db.read(
        lambda c: c.execute("SELECT state FROM inbox WHERE state != 'done'").fetchall()
    )
    return [r["state"] for r in rows]


async def test_a_turn_broken_by_an_unreadable_stored_row_is_answered_as_failed(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        assert await client.ask("first") == "echo: first"
        await store_of(gw).db.write(
            lambda c: c.execute("UPDATE messages SET media = 'not json' WHERE role = 'assistant'")
        )
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        with logged("turn_crashed") as crashed:  # the new gateway opens the session cold
            assert await client.ask("second") == tr(Locale.EN, Msg.GENERIC_FAILURE)
        assert crashed.is_set()
        assert await unfinished(gw) == []  # nothing for recovery to run again
        await store_of(gw).db.write(lambda c: c.execute("UPDATE messages SET media = NULL"))
        assert await client.ask("third") == "echo: third"
    assert len(llm.requests) == 2
    said = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"]
    assert said == ["first", "third"]  # the broken turn's message is left out
    assert newest(llm.requests[1])["content"] == "third"


REFUSE_ANSWER = (
    "CREATE TRIGGER refuse_answer BEFORE UPDATE OF state ON inbox "
    "WHEN NEW.state = 'done' BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
)


async def test_a_turn_broken_by_storage_is_left_to_recovery_and_answered_once(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        await store_of(gw).db.write(lambda c: c.execute(REFUSE_ANSWER))
        with logged("turn_crashed") as crashed:
            await client.send("hello")
            await asyncio.wait_for(crashed.wait(), 10)
        assert await unfinished(gw) == ["started"]  # not answered as failed
        await store_of(gw).db.write(lambda c: c.execute("DROP TRIGGER refuse_answer"))
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        reply = await client.recv_type("message")
        assert reply["text"] == "echo: hello"
        assert await unfinished(gw) == []
    assert len(llm.requests) == 2  # the crashed turn's call, and recovery's


async def test_a_turn_carried_on_from_an_approval_that_breaks_is_answered_and_closes_it(
    home: Path, llm: FakeOpenAI
) -> None:
    """The carry-on opens the session cold (a paused turn's cache is dropped)
    and breaks on the unreadable row: the asker is told, the approval is done
    and no start carries it on again (before, it was left to recovery, which
    broke the same way at every start)."""
    loaded = approval_config(home, llm)
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        assert await client.ask("first") == "echo: first"
        await store_of(gw).db.write(
            lambda c: c.execute("UPDATE messages SET media = 'not json' WHERE role = 'assistant'")
        )
        llm.add_tool_call("bash", {"command": MARK})
        await client.send("make the file")
        assert ASK in await next_text(client)
        with logged("turn_crashed") as crashed:
            await client.send("/approve")
            assert await next_text(client) == tr(Locale.EN, Msg.GENERIC_FAILURE)
        assert crashed.is_set()
        assert await unfinished(gw) == []
        states = await store_of(gw).db.read(
            lambda c: c.execute("SELECT state FROM approvals").fetchall()
        )
        assert [s["state"] for s in states] == ["done"]
        late = OutboundMessage("websocket", CHAT, "a second notice")  # a break after the commit
        assert await store_of(gw).approvals.close_broken_turn(1, "run-late", [1], late) is None
        assert await outbox_texts(gw, "a second notice") == 0
        await client.send("/approve")  # nothing waits in the chat any more
        assert await next_text(client) == tr(Locale.EN, Msg.TOOL_APPROVAL_NONE)
    assert (home / "workspace" / "approved.txt").exists()  # the approved call ran, once
    calls = len(llm.requests)
    async with running_gateway(loaded) as gw, ws_client(gw, CHAT) as client:
        assert await unfinished(gw) == []  # nothing for recovery to carry on
        await store_of(gw).db.write(lambda c: c.execute("UPDATE messages SET media = NULL"))
        assert await client.ask("after") == "echo: after"
    # one model call, the new turn's; the approval and the rows were closed before the restart
    assert len(llm.requests) == calls + 1
    roles = [m["role"] for m in llm.requests[-1]["messages"]]
    assert roles.count("tool") == 1  # the call that ran stays in the history, with its result
