"""WebSocket replies across workers (issue 54, docs/scale-out.md): a reply of a
turn run on one worker reaches the chat's clients connected to another, once
each; a reply written while the chat had no client anywhere waits, parked, and
goes to the client that connects again, to any worker."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import query, running_cluster
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import WsClient, process_config, wait_until, ws_client

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


async def _frames_until(client: WsClient, reply_to: str) -> list[dict[str, Any]]:
    """Every message frame up to and including the reply to `reply_to`."""
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        while True:
            frame = await client.recv(30)
            if frame["type"] != "message":
                continue
            frames.append(frame)
            if frame.get("reply_to") == reply_to:
                return frames


async def test_a_reply_reaches_the_chats_clients_on_every_worker_once(
    tmp_path: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    config = process_config(llm.base_url, storage={"url": postgres_url})
    async with (
        running_cluster(tmp_path, config, size=2, balancer=False) as cluster,
        ws_client(cluster[0].current, "shared") as laptop,
        ws_client(cluster[1].current, "shared") as phone,
    ):
        assert await laptop.ask("one", timeout=30) == "echo: one"  # worker 0 takes the chat
        asked = await phone.send("two")  # recorded by worker 1, run by worker 0
        seen_by_phone = await _frames_until(phone, asked)
        seen_by_laptop = await _frames_until(laptop, asked)
        closing = await laptop.send("three")
        seen_by_phone += await _frames_until(phone, closing)
        seen_by_laptop += await _frames_until(laptop, closing)
    for seen in (seen_by_phone, seen_by_laptop):
        replies = [f for f in seen if f.get("reply_to") in (asked, closing)]
        assert [f["text"] for f in replies] == ["echo: two", "echo: three"]
        assert max(Counter(f["id"] for f in seen).values()) == 1  # no frame twice
    # every turn ran on worker 0, the phone's too: its reply crossed over
    assert [len(cluster[i].events("turn_done")) for i in (0, 1)] == [3, 0]
    sent = await query(postgres_url, "SELECT state FROM outbox ORDER BY id")
    assert [s[0] for s in sent] == ["sent", "sent", "sent"]  # one row per reply


async def test_a_reply_parked_while_nobody_listened_goes_to_the_client_back_on_another_worker(
    tmp_path: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    hold = asyncio.Event()

    async def after_the_client_left(body: dict[str, Any]) -> Reply | None:
        await hold.wait()
        return None  # the default echo

    llm.responder = after_the_client_left
    config = process_config(llm.base_url, storage={"url": postgres_url})
    async with running_cluster(tmp_path, config, size=2, balancer=False) as cluster:
        async with ws_client(cluster[0].current, "away") as client:
            asked = await client.send("are you there")
            ack = await client.recv_type("ack", 30)
            assert ack["status"] == "accepted"
        hold.set()  # the turn ends with nobody connected

        async def parked() -> bool:
            rows = await query(postgres_url, "SELECT state FROM outbox")
            return [r[0] for r in rows] == ["parked"]

        await wait_until(parked, timeout=30)
        async with ws_client(cluster[1].current, "away") as back:
            frames = await _frames_until(back, asked)
    assert [f["text"] for f in frames] == ["echo: are you there"]
    assert frames[0]["earlier"] is True
    rows = await query(postgres_url, "SELECT state FROM outbox")
    assert [r[0] for r in rows] == ["sent"]
