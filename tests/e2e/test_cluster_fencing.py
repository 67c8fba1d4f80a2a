"""Fencing across two workers on one PostgreSQL database (issue 54).

Worker A records a Telegram message (a webhook POSTed to A itself) and runs
its turn; the fake LLM holds A's request. A is paused (SIGSTOP) past its
lease: worker B takes the chat over, resumes the started inbox row on the
stored history and answers. Then A's held LLM answer is let go and A resumed
(SIGCONT): A's late write is refused by the fencing check (`fence_refused`),
so the chat gets one reply, B's, and the database holds that one reply.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster import query, report
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support import (
    GatewayProcess,
    child_env,
    newest,
    process_config,
    spawn_gateway,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE_SECS = 2
# over the lease and its heartbeat, for a busy 2-core machine: catches a
# takeover that never comes, times nothing
TAKEOVER_MARGIN_SECS = 20
SECRET = "fence-secret"
CHAT = 4242
QUESTION = "who answers this?"
ANSWER = f"echo: {QUESTION}"  # the fake LLM's default: B's answer
LATE = "A's late answer"  # what A's held request gets, too late


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(identify_clients=True) as fake:  # which worker sent each message
        yield fake


class HeldFirstRequest:
    """The fake LLM's responder: the first request (A's turn) waits until
    `release` and then gets `LATE`; every later one gets the default echo."""

    def __init__(self) -> None:
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> Reply | None:
        if self.held.is_set():
            return None
        self.held.set()
        await self.release.wait()
        return Reply(text=LATE)


def trail(workers: list[GatewayProcess]) -> str:
    """Each worker's cluster events, warnings and errors, for a failure's message."""
    names = {"channel_lease_taken", "channel_lease_lost", "fence_refused", "inbox_recovered"}
    lines = [
        f"{'AB'[i]}: {e}"
        for i, w in enumerate(workers)
        for e in w.lines
        if e.get("event") in names or e.get("level") in ("warning", "error", "critical")
    ]
    return "\n".join(lines[-60:])


async def test_a_paused_workers_late_write_is_refused_and_the_chat_answered_once(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram, postgres_url: str
) -> None:
    gate = HeldFirstRequest()
    llm.responder = gate
    workers: list[GatewayProcess] = []
    paused = False
    try:
        for name in ("a", "b"):
            home = tmp_path / name
            home.mkdir()
            config = process_config(
                llm.base_url,
                storage={"url": postgres_url},
                channels={
                    "telegram": tg.settings(
                        mode="webhook",
                        webhook_url="https://bot.example.test/webhooks/telegram",
                        secret_token=SECRET,
                    )
                },
                cluster={"worker_name": name, "lease_secs": LEASE_SECS},
            )
            workers.append(await spawn_gateway(config, home, child_env(home)))
        a, b = workers
        update = {"update_id": 1, "message": tg.message(QUESTION, chat_id=CHAT, user_id=CHAT)}
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://127.0.0.1:{a.port}/webhooks/telegram",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            ) as resp,
        ):
            assert resp.status == 200  # recorded by A
        async with asyncio.timeout(30):
            await gate.held.wait()  # A's turn waits on the LLM
        a.proc.send_signal(signal.SIGSTOP)
        paused, paused_at = True, time.monotonic()

        # B takes the chat over once A's lease lapsed, and answers on the stored history
        try:
            requests = await llm.wait_requests(2, timeout=LEASE_SECS + TAKEOVER_MARGIN_SECS)
        except TimeoutError:
            raise AssertionError(f"B never took the chat over:\n{trail(workers)}") from None
        takeover_secs = time.monotonic() - paused_at
        assert newest(requests[1])["content"] == QUESTION
        try:
            await tg.wait_for(lambda: ANSWER in tg.sent_texts, timeout=30)
        except TimeoutError:
            raise AssertionError(f"B's answer never sent:\n{trail(workers)}") from None

        # A wakes up with its LLM answer in hand: its write must be refused
        gate.release.set()
        a.proc.send_signal(signal.SIGCONT)
        paused = False
        try:
            refused = await a.wait_event("fence_refused", timeout=30)
        except TimeoutError:
            raise AssertionError(f"A's late write was not refused:\n{trail(workers)}") from None
        assert refused["lease"] == f"chat:telegram:{CHAT}"
        assert refused["chat"] == str(CHAT)
    finally:
        gate.release.set()
        if paused:
            workers[0].proc.send_signal(signal.SIGCONT)
        # both stopped (cleanly): nothing can be sent after this
        exits = [await w.stop() for w in workers]
    assert exits == [0, 0], trail(workers)

    sends = [c for c in tg.calls_of("sendMessage") if c.params.get("_ok")]
    assert [(c.params["chat_id"], c.params["text"]) for c in sends] == [(str(CHAT), ANSWER)]
    assert sends[0].pid == b.proc.pid  # sent by B
    assert not any(LATE in c.params.get("text", "") for c in tg.calls)
    assert all(e["lease"] == f"chat:telegram:{CHAT}" for e in a.events("fence_refused"))
    assert not b.events("fence_refused")

    inbox = await query(
        postgres_url,
        "SELECT i.state, o.text, o.state FROM inbox i LEFT JOIN outbox o ON o.inbox_id = i.id",
    )
    assert inbox == [("done", ANSWER, "sent")]  # one message, one reply, sent
    history = await query(
        postgres_url,
        "SELECT role, content FROM messages WHERE role IN ('user', 'assistant') ORDER BY seq",
    )
    assert history == [("user", QUESTION), ("assistant", ANSWER)]

    report(
        "fencing_takeover",
        lease_secs=LEASE_SECS,
        pause_to_b_llm_request_secs=round(takeover_secs, 3),
        fence_refused=len(a.events("fence_refused")),
        llm_requests=len(llm.requests),
    )
