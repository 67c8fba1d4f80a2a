"""Who pays for a model call (gateway/spend/payer.py), as the usage log
records it through a whole gateway: a sub-agent's calls are its turn's
sender's and chat's, a compaction is its chat's, a scheduled run is charged
to the job's target chat and sender."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.recording_channel import RecordingChannel
from tests.support import ask_on, make_config, running_gateway, ws_client


async def _usage_rows(gw: Gateway) -> list[tuple[Any, ...]]:
    assert gw.store is not None
    rows = await gw.store.db.read(
        lambda c: c.execute(
            "SELECT kind, channel, chat_id, sender_id, agent, run_id, input_tokens, "
            "output_tokens FROM usage_log ORDER BY id"
        ).fetchall()
    )
    return [tuple(r) for r in rows]


async def test_a_sub_agents_calls_are_charged_to_the_turn_that_started_it(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call(
        "task",
        {"description": "look", "prompt": "look around", "subagent_type": "explore"},
        call_id="call-1",
    )
    llm.add_text("found it")  # the child's answer
    llm.add_text("done")
    channel = RecordingChannel()
    async with running_gateway(make_config(home, llm.base_url), extra_channels=[channel]) as gw:
        assert await ask_on(channel, "room", "go", sender_id="dana") == "done"
        rows = await _usage_rows(gw)
    assert len(rows) == len(llm.requests) == 3  # parent, child, parent
    assert {r[:5] for r in rows} == {("turn", "rec", "room", "dana", "default")}
    assert len({r[5] for r in rows}) == 1  # one turn's run id
    assert all(r[6] > 0 for r in rows)  # the fake's counted usage, stored


async def test_a_compaction_is_charged_to_its_chat(home: Path, llm: FakeOpenAI) -> None:
    async def summarise(body: dict[str, Any]) -> Reply | None:
        return Reply(text="a summary", usage=(700, 20)) if "tools" not in body else None

    llm.responder = summarise
    loaded = make_config(
        home, llm.base_url, agents={"default": {"compaction": {"keep_user_turns": 1}}}
    )
    async with running_gateway(loaded) as gw, ws_client(gw, "long") as client:
        for n in range(3):
            await client.ask(f"turn {n} " + "x" * 100)
        assert (await client.ask("/compact")).startswith("Compacted")
        rows = await _usage_rows(gw)
    compactions = [r for r in rows if r[0] == "compaction"]
    assert compactions == [("compaction", "websocket", "long", "", "default", None, 700, 20)]
    assert [r[0] for r in rows].count("turn") == 3


async def test_a_scheduled_run_is_charged_to_its_target_and_sender(
    home: Path, llm: FakeOpenAI
) -> None:
    job = {
        "id": "job.report",
        "kind": "agent_task",
        "schedule": {"type": "delay", "seconds": 0.1},
        "target": {"channel": "rec", "chat_id": "team"},
        "payload": {"prompt": "report", "sender_id": "ops-bot"},
    }
    channel = RecordingChannel()
    loaded = make_config(
        home,
        llm.base_url,
        scheduler={"enabled": True, "tick_resolution_ms": 10, "jobs": [job]},
    )
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        await channel.wait_sent(1)
        rows = await _usage_rows(gw)
    assert [r[:5] for r in rows] == [("turn", "rec", "team", "ops-bot", "default")]
