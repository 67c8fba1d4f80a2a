"""Every approval ends exactly once, through a real gateway and the fake LLM:
/stop while its calls run, a timeout whose denial cannot be written at first,
a crash right after a newer message superseded it (docs/approvals.md)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.typing import EventDict

from agent.messages import CANCELLED_RESULT, INTERRUPTED_RESULT
from gateway.app import Gateway
from gateway.i18n import Locale, Msg, tr
from storage.sql.approvals import ApprovalState
from storage.store import Store
from tests.e2e.test_approvals import ASK, approval_config, next_text
from tests.fakes.openai_server import FakeOpenAI
from tests.support import conversation, newest, running_gateway, ws_client


def store_of(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


async def state_of(gw: Gateway, approval_id: int) -> ApprovalState:
    record = await store_of(gw).approvals.get(approval_id)
    assert record is not None
    return record.state


async def test_stop_while_approved_calls_run_cancels_them_and_ends_the_approval(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": "sleep 30; touch finished.txt"})
    llm.add_text("It was cancelled, so nothing finished.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("run the slow job")
        assert ASK in await next_text(client)
        await client.send("/approve")
        running = await client.recv_type("tool", timeout=20)  # the approved call started
        assert (running["name"], running["status"]) == ("bash", "running")
        await client.send("/stop")
        assert await next_text(client) == tr(Locale.EN, Msg.STOPPED)
        assert await state_of(gw, 1) is ApprovalState.DONE
        assert "not waiting" in await client.ask("/approve 1")
        assert await client.ask("what happened?") == "It was cancelled, so nothing finished."
    assert not (home / "workspace" / "finished.txt").exists()
    assert len(llm.requests) == 2
    tool, user = conversation(llm.requests[1])[-2:]
    assert tool["role"] == "tool"
    assert tool["content"] == CANCELLED_RESULT
    assert user == {"role": "user", "content": "what happened?"}
    assert newest(llm.requests[1]) == user


@contextlib.contextmanager
def logged(event: str) -> Iterator[asyncio.Event]:
    """An event set when the gateway logs `event` (structlog, in this process)."""
    seen = asyncio.Event()

    def watch(_logger: object, _method: str, event_dict: EventDict) -> EventDict:
        if event_dict.get("event") == event:
            seen.set()
        return event_dict

    processors = structlog.get_config()["processors"]
    structlog.configure(processors=[watch, *processors])
    try:
        yield seen
    finally:
        structlog.configure(processors=processors)


# a real storage error: SQLite refuses to deny any approval while this trigger exists
REFUSE_DENIAL = (
    "CREATE TRIGGER refuse_denial BEFORE UPDATE OF state ON approvals "
    "WHEN NEW.state = 'denied' BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
)


async def test_a_timeout_whose_denial_fails_is_retried_and_the_chat_gets_its_answer(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": "touch approved.txt"})
    llm.add_text("Nobody said yes, so I did not.")
    loaded = approval_config(home, llm, timeout_secs=0.5)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        store = store_of(gw)
        await store.db.write(lambda c: c.execute(REFUSE_DENIAL))
        with logged("approval_timeout_failed") as failed:
            await client.send("make the file")
            assert ASK in await next_text(client)
            await asyncio.wait_for(failed.wait(), 10)
        assert await state_of(gw, 1) is ApprovalState.PENDING
        await store.db.write(lambda c: c.execute("DROP TRIGGER refuse_denial"))
        assert await next_text(client) == "Nobody said yes, so I did not."
        assert await state_of(gw, 1) is ApprovalState.DONE
    assert not (home / "workspace" / "approved.txt").exists()
    assert len(llm.requests) == 2
    assert newest(llm.requests[1])["content"].startswith("[denied: nobody approved it")


# a real storage error: SQLite refuses to end any approval while this trigger exists
REFUSE_DONE = (
    "CREATE TRIGGER refuse_done BEFORE UPDATE OF state ON approvals "
    "WHEN NEW.state = 'done' BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
)


SUPERSEDED_RESULT = "[denied: the user sent a new message instead of approving]"


@pytest.mark.parametrize(
    ("with_free_call", "state", "results"),
    [
        (False, ApprovalState.DENIED, [SUPERSEDED_RESULT]),
        # a call of the batch that needs no approval ran, but its result was not
        # stored: after the restart it reads "[interrupted]", as after any crash
        (True, ApprovalState.EXECUTING, [SUPERSEDED_RESULT, INTERRUPTED_RESULT]),
    ],
)
async def test_a_restart_right_after_a_supersede_carries_it_out_once(
    home: Path,
    llm: FakeOpenAI,
    with_free_call: bool,
    state: ApprovalState,
    results: list[str],
) -> None:
    """The newer message's turn dies after the request is refused as
    superseded and before its results are stored: after the restart the
    newer message is answered with those results before it, and nothing
    else (no turn of its own for the refused request)."""
    held = ("bash", {"command": "touch approved.txt"})
    free = ("calculator", {"expression": "6*7"})  # needs no approval
    llm.add_tool_calls([held, free] if with_free_call else [held])
    llm.add_text("Here is a joke.")
    llm.add_text("An extra turn nobody asked for.")
    loaded = approval_config(home, llm)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)
        store = store_of(gw)
        await store.db.write(lambda c: c.execute(REFUSE_DONE))
        with logged("turn_crashed") as crashed:
            joke = await client.send("no wait, tell me a joke")
            await asyncio.wait_for(crashed.wait(), 10)
        assert await state_of(gw, 1) is state  # refused as superseded, no result stored yet
        await store.db.write(lambda c: c.execute("DROP TRIGGER refuse_done"))
    assert len(llm.requests) == 1

    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        reply = await client.recv_type("message")
        assert (reply["text"], reply["reply_to"]) == ("Here is a joke.", joke)
        assert await state_of(gw, 1) is ApprovalState.DONE
        status = await client.send("/status")
        assert (await client.recv_type("message"))["reply_to"] == status  # nothing else came
    assert len(llm.requests) == 2
    *tools, user = conversation(llm.requests[1])[-1 - len(results) :]
    assert [t["content"] for t in tools] == results
    assert user == {"role": "user", "content": "no wait, tell me a joke"}
    assert not (home / "workspace" / "approved.txt").exists()
