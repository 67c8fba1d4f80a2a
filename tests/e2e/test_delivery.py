"""Delivery guarantees in-process: dedup, busy-session queueing, /stop, retries,
head-of-line isolation, reconnect delivery (DESIGN §4: 2, 4, 5, 6)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agent.messages import CANCELLED_RESULT
from channels.base import TransientSendError
from gateway.bus import Receipt
from gateway.cli import main as picobot_main
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import conversation, make_config, replies_written, running_gateway, ws_client


async def _count(db_path: Path, sql: str) -> int:
    async with Database(db_path) as db:
        return int(await db.read(lambda c: c.execute(sql).fetchone()[0]))


async def test_same_platform_id_three_times_is_one_turn_one_reply(
    home: Path, llm: FakeOpenAI
) -> None:
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        receipts = await asyncio.gather(
            *(channel.submit("c1", "hello", message_id="evt-1") for _ in range(3))
        )
        assert sorted(receipts) == [Receipt.ACCEPTED, Receipt.DUPLICATE, Receipt.DUPLICATE]
        assert await channel.submit("c1", "hello", message_id="evt-1") is Receipt.DUPLICATE
        await channel.wait_sent(1)
        assert gw.dispatcher is not None
        assert await gw.dispatcher.flush(5)
    assert channel.texts() == ["echo: hello"]
    assert len(llm.requests) == 1
    assert await _count(loaded.storage_path, "SELECT COUNT(*) FROM inbox") == 1
    assert await _count(loaded.storage_path, "SELECT COUNT(*) FROM outbox") == 1


async def _busy_session(
    home: Path, llm: FakeOpenAI, mode: str
) -> tuple[RecordingChannel, FakeOpenAI]:
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, gateway={"queue_mode": mode})
    llm.hold()
    async with running_gateway(loaded, extra_channels=[channel]):
        await channel.submit("c1", "first", message_id="m1")
        await llm.wait_requests(1)  # the first turn is now running
        await channel.submit("c1", "second", message_id="m2")
        await channel.submit("c1", "third", message_id="m3")
        llm.release()
        await channel.wait_sent(2 if mode == "collect" else 3)
    return channel, llm


async def test_collect_mode_merges_messages_that_arrive_while_busy(
    home: Path, llm: FakeOpenAI
) -> None:
    channel, llm = await _busy_session(home, llm, "collect")
    assert len(llm.requests) == 2
    merged = conversation(llm.requests[1])[-1]["content"]
    assert merged.startswith("[2 messages arrived while you were busy")
    assert "[1] second" in merged
    assert "[2] third" in merged
    replies = [(s.message.reply_to_message_id, s.message.text) for s in channel.sent]
    assert replies == [("m1", "echo: first"), ("m3", f"echo: {merged}")]


async def test_followup_mode_answers_each_message_in_order(home: Path, llm: FakeOpenAI) -> None:
    channel, llm = await _busy_session(home, llm, "followup")
    assert [conversation(r)[-1]["content"] for r in llm.requests] == ["first", "second", "third"]
    replies = [(s.message.reply_to_message_id, s.message.text) for s in channel.sent]
    assert replies == [("m1", "echo: first"), ("m2", "echo: second"), ("m3", "echo: third")]


async def test_pending_cap_answers_instead_of_dropping(home: Path, llm: FakeOpenAI) -> None:
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, gateway={"max_pending_per_session": 1})
    llm.hold()
    async with running_gateway(loaded, extra_channels=[channel]):
        await channel.submit("c1", "first", message_id="m1")
        await llm.wait_requests(1)
        assert await channel.submit("c1", "second", message_id="m2") is Receipt.ACCEPTED
        # over the cap: refused in the ack itself, then told so
        assert await channel.submit("c1", "third", message_id="m3") is Receipt.REFUSED
        refused = await channel.wait_sent(1)
        assert refused[0].message.reply_to_message_id == "m3"
        assert "not queued" in refused[0].message.text
        llm.release()
        await channel.wait_sent(3)
    assert sorted(s.message.reply_to_message_id or "" for s in channel.sent) == ["m1", "m2", "m3"]


async def test_stop_cancels_a_long_tool_call_and_the_session_goes_on(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": "sleep 30"})
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        slow = await client.send("run the slow thing")
        await client.recv_type("working")
        await client.recv_type("tool")  # the call runs (its assistant message is stored)
        await client.send("/stop")
        # a bound, not a timing: the answer comes before the 30 s call could end
        frame = await client.recv_type("message", timeout=20)
        assert frame["reply_to"] == slow
        assert frame["text"].startswith("Stopped.")
        assert await client.ask("are you there?") == "echo: are you there?"
    history = conversation(llm.requests[-1])
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user"]
    assert history[1]["tool_calls"][0]["function"]["name"] == "bash"
    assert history[2]["content"] == CANCELLED_RESULT
    assert history[2]["tool_call_id"] == history[1]["tool_calls"][0]["id"]


async def test_stop_when_idle_says_so(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        assert await client.ask("/stop") == "Nothing is running."


async def test_rate_limit_is_honoured_and_delivery_happens_once(
    home: Path, llm: FakeOpenAI
) -> None:
    channel = RecordingChannel()
    channel.rate_limit_next(retry_after=1.0)
    async with running_gateway(make_config(home, llm.base_url), extra_channels=[channel]):
        await channel.submit("c1", "hi", message_id="m1")
        sent = await channel.wait_sent(1)
        first_try = channel.attempts[0]
    assert len(channel.attempts) == 2
    assert [s.message.text for s in sent] == ["echo: hi"]
    assert sent[0].message.outbox_id == first_try.outbox_id
    assert sent[0].message.attempt == 2


async def test_a_reply_waits_behind_an_earlier_one_of_its_chat_awaiting_retry(
    home: Path, llm: FakeOpenAI
) -> None:
    channel = RecordingChannel()
    channel.rate_limit_next(retry_after=1.0)
    async with running_gateway(make_config(home, llm.base_url), extra_channels=[channel]):
        await channel.submit("c1", "first", message_id="m1")
        await channel.wait_attempts(1)  # refused: retry in 1 s
        await channel.submit("c1", "second", message_id="m2")
        await channel.submit("c2", "elsewhere", message_id="m3")
        sent = await channel.wait_sent(3)
    # the other chat does not wait; this chat's replies keep their order
    assert [s.message.text for s in sent] == ["echo: elsewhere", "echo: first", "echo: second"]
    assert len(channel.attempts) == 4


async def test_handed_over_and_scanned_replies_are_each_sent_once_in_order(
    home: Path, llm: FakeOpenAI
) -> None:
    """Turn replies reach the sender in memory, command answers by a scan of
    the outbox; interleaved across chats, each row still goes out once."""
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, gateway={"queue_mode": "followup"})
    async with running_gateway(loaded, extra_channels=[channel]):
        for i in range(40):
            text = "/help" if i % 5 == 0 else f"m{i}"
            await channel.submit(f"c{i % 4}", text, message_id=f"id{i}")
        await channel.wait_sent(40)
        await asyncio.sleep(0.3)  # nothing more may follow
    ids = [s.message.outbox_id for s in channel.sent]
    assert len(ids) == len(set(ids)) == 40
    for chat in ("c0", "c1", "c2", "c3"):
        echoes = [t for t in channel.texts(chat) if t.startswith("echo: ")]
        expected = [f"echo: m{i}" for i in range(40) if i % 4 == int(chat[1]) and i % 5]
        assert echoes == expected


async def test_failing_channel_does_not_delay_another(home: Path, llm: FakeOpenAI) -> None:
    bad, good = RecordingChannel("bad"), RecordingChannel("good")
    bad.fail_forever = TransientSendError("platform down")
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"outbound_retry_base_secs": 0.05, "outbound_retry_max_secs": 0.2},
    )
    async with running_gateway(loaded, extra_channels=[bad, good]) as gw:
        await bad.submit("b1", "to the broken channel", message_id="b1")
        await llm.wait_requests(1)
        loop = asyncio.get_running_loop()
        timings = []
        for i in range(5):
            t0 = loop.time()
            await good.submit("g1", f"msg {i}", message_id=f"g{i}")
            sent = await good.wait_sent(i + 1)
            timings.append(sent[-1].at - t0)
        assert max(timings) < 2.0  # never waits behind the failing channel's retries
        await bad.wait_attempts(10)  # it keeps trying: no attempt count ends the row
        assert gw.dispatcher is not None
        await gw.dispatcher.flush(5)
        assert gw.dispatcher.sending_problem("bad") is not None
        assert gw.dispatcher.sending_problem("good") is None
    states = await _count(
        loaded.storage_path, "SELECT COUNT(*) FROM outbox WHERE channel='bad' AND state='pending'"
    )
    assert states == 1
    assert good.texts() == [f"echo: msg {i}" for i in range(5)]


async def test_permanent_error_is_not_retried_and_cli_can_requeue(
    home: Path, llm: FakeOpenAI, capsys: Any
) -> None:
    channel = RecordingChannel()
    channel.fail_permanently()
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        await channel.submit("c1", "hi", message_id="m1")
        await channel.wait_attempts(1)
        assert gw.dispatcher is not None
        await gw.dispatcher.flush(5)
    assert len(channel.attempts) == 1
    capsys.readouterr()  # drop the gateway's own log lines
    config_file = home / "config.json"
    config_file.write_text(json.dumps({"storage": {"path": str(loaded.storage_path)}}))
    assert (
        await asyncio.to_thread(
            picobot_main, ["outbox", "list", "--failed", "--config", str(config_file)]
        )
        == 0
    )
    listing = capsys.readouterr().out
    assert "failed\trec:c1" in listing
    assert "PermanentSendError: bot was blocked by the user" in listing
    row_line = next(line for line in listing.splitlines() if "\tfailed\t" in line)
    row_id = int(row_line.split("\t", 1)[0])
    assert (
        await asyncio.to_thread(
            picobot_main, ["outbox", "retry", str(row_id), "--config", str(config_file)]
        )
        == 0
    )
    # a gateway started again delivers the re-queued row
    channel.fail_forever = None
    async with running_gateway(loaded, extra_channels=[channel]):
        sent = await channel.wait_sent(1)
    assert sent[0].message.text == "echo: hi"


async def test_a_row_requeued_while_the_gateway_runs_is_sent_by_the_next_rescan(
    home: Path, llm: FakeOpenAI, capsys: Any
) -> None:
    channel = RecordingChannel()
    channel.fail_permanently()
    loaded = make_config(home, llm.base_url, gateway={"outbox_rescan_secs": 0.5})
    config_file = home / "config.json"
    config_file.write_text(
        json.dumps(
            {"storage": {"path": str(loaded.storage_path)}, "gateway": {"outbox_rescan_secs": 0.5}}
        )
    )
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        await channel.submit("c1", "hi", message_id="m1")
        await channel.wait_attempts(1)
        assert gw.dispatcher is not None
        assert gw.db is not None
        await gw.dispatcher.flush(5)  # the failure is recorded
        row_id = await gw.db.read(
            lambda c: c.execute("SELECT id FROM outbox WHERE state = 'failed'").fetchone()[0]
        )
        channel.fail_forever = None
        capsys.readouterr()
        assert (
            await asyncio.to_thread(
                picobot_main, ["outbox", "retry", str(row_id), "--config", str(config_file)]
            )
            == 0
        )
        assert "sends it within 0.5 seconds" in capsys.readouterr().out
        sent = await channel.wait_sent(1, timeout=5)  # no message, command or restart needed
    assert sent[0].message.outbox_id == row_id


async def test_reply_waits_for_a_disconnected_client_and_arrives_once(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.hold()
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with ws_client(gw, chat_id="roamer") as client:
            msg_id = await client.send("reply while I'm away")
            assert (await client.recv_type("ack"))["id"] == msg_id
            await llm.wait_requests(1)
        llm.release()  # the reply is written now, with nobody connected
        await replies_written(gw)
        assert gw.dispatcher is not None
        await gw.dispatcher.flush(5)  # the reply is parked: nobody is connected
        for _ in range(2):  # reconnecting twice: the reply comes once
            async with ws_client(gw, chat_id="roamer") as client:
                frames: list[dict[str, Any]] = []
                if _ == 0:
                    frames.append(await client.recv_type("message", timeout=10))
                try:  # and nothing more: no second copy
                    while True:
                        frames.append(await client.recv(timeout=0.5))
                except TimeoutError:
                    pass
                replies = [f for f in frames if f["type"] == "message"]
                if _ == 0:
                    assert [(f["reply_to"], f["text"]) for f in replies] == [
                        (msg_id, "echo: reply while I'm away")
                    ]
                else:
                    assert replies == []


async def test_idle_conversations_release_their_workers(home: Path, llm: FakeOpenAI) -> None:
    channel = RecordingChannel()
    async with running_gateway(make_config(home, llm.base_url), extra_channels=[channel]) as gw:
        await asyncio.gather(
            *(channel.submit(f"chat-{i}", "hi", message_id=f"m{i}") for i in range(50))
        )
        await channel.wait_sent(50)
        assert gw.sessions is not None
        await asyncio.wait_for(gw.sessions._idle.wait(), 5)
        assert gw.sessions.active_conversations == 0  # nothing kept per idle chat
        assert len(gw.sessions.gates) == 0
        assert len({s.message.chat_id for s in channel.sent}) == 50
