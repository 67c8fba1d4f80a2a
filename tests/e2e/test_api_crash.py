"""The API channel (channels.api, docs/api.md) across SIGKILL of a real
`picobot gateway` process: a request without streaming is in flight at the
LLM when the gateway dies; after the restart the same request, retried with
its `Idempotency-Key`, gets its answer, and the turn is answered once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.support import child_env, process_config, spawn_gateway, wait_until

pytestmark = pytest.mark.slow

NAME, KEY = "alice", "key-alice-0123456789"
SESSION, IDEMPOTENCY_KEY = "crash", "k-crash-1"
QUESTION = "survive the crash"
PLATFORM_ID = f"token:{NAME}:{IDEMPOTENCY_KEY}"  # <principal>:<Idempotency-Key>
CHAT_ID = f"token:{NAME}/{SESSION}"  # <principal>/<session>
HEADERS = {
    "Authorization": f"Bearer {KEY}",
    "X-Picobot-Session": SESSION,
    "Idempotency-Key": IDEMPOTENCY_KEY,
}
BODY = {"model": "picobot", "messages": [{"role": "user", "content": QUESTION}]}


async def _post(http: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with http.post(url, json=BODY, headers=HEADERS) as response:
        return response.status, await response.json()


async def _fetch(http: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/v1/picobot/replies/{IDEMPOTENCY_KEY}"
    headers = {k: v for k, v in HEADERS.items() if k != "Idempotency-Key"}
    async with http.get(url, headers=headers) as response:
        return response.status, await response.json()


async def _outbox_rows(db_path: Path) -> int:
    async with Database(db_path) as db:
        count: int = await db.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM outbox WHERE channel = 'api' AND reply_to_message_id = ?",
                (PLATFORM_ID,),
            ).fetchone()[0]
        )
    return count


@pytest.mark.parametrize("retry", ["while_running", "after_answered"])
async def test_sigkill_mid_request_then_the_retry_with_its_key_gets_the_answer_once(
    home: Path, llm: FakeOpenAI, retry: str
) -> None:
    """`while_running`: the retry arrives while the recovered turn is held at
    the LLM, so it waits for the reply; `after_answered`: the recovered turn's
    reply was written while no client waited, and the retry reads it back."""
    llm.hold()
    env = child_env(home)
    config = process_config(llm.base_url, channels={"api": {"enabled": True, "keys": {NAME: KEY}}})
    db_path = home / "storage" / "sessions.db"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        gw = await spawn_gateway(config, home, env)
        first = asyncio.create_task(_post(http, gw.port))
        await llm.wait_requests(1, timeout=20)  # the turn is in flight, held at the LLM
        assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
        with pytest.raises(aiohttp.ClientError):  # the first connection died with it
            await first

        gw2 = await spawn_gateway(config, home, env)
        try:
            await llm.wait_requests(2, timeout=30)  # the recovered turn asks again
            if retry == "while_running":
                assert (await _fetch(http, gw2.port))[0] == 202
                again = asyncio.create_task(_post(http, gw2.port))
                await gw2.wait_event("inbound_duplicate")  # the retry waits for the first's answer
                llm.release()
                status, answer = await again
            else:
                llm.release()
                await wait_until(lambda: _outbox_rows(db_path), timeout=20)
                status, answer = await _post(http, gw2.port)
            assert status == 200, answer
            assert answer["choices"][0]["message"]["content"] == f"echo: {QUESTION}"
            fetched_status, fetched = await _fetch(http, gw2.port)
            assert fetched_status == 200, fetched
            assert fetched["choices"][0]["message"]["content"] == f"echo: {QUESTION}"
            assert fetched["id"] == answer["id"]
        finally:  # a second turn, were one started, would ask the LLM before the stop ends
            llm.release()
            assert await gw2.stop() == 0

    assert gw2.events("inbox_recovered")[0]["rows"] == 1
    # one LLM call before the kill (its answer never read), one after the restart
    assert [last_user_text(r["messages"]) for r in llm.requests] == [QUESTION, QUESTION]

    async with Database(db_path) as db:
        inbox = await db.read(
            lambda c: c.execute(
                "SELECT state FROM inbox WHERE channel = 'api' AND platform_id = ?",
                (PLATFORM_ID,),
            ).fetchall()
        )
        transcript = await db.read(
            lambda c: c.execute(
                "SELECT m.role, m.content FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE s.channel = 'api' AND s.chat_id = ? AND m.role != 'system' ORDER BY m.seq",
                (CHAT_ID,),
            ).fetchall()
        )
    assert [tuple(r) for r in inbox] == [("done",)]
    assert [tuple(r) for r in transcript] == [
        ("user", QUESTION),
        ("assistant", f"echo: {QUESTION}"),
    ]
    assert await _outbox_rows(db_path) == 1
