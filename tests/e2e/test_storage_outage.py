"""Storage errors don't strand work (issue 51, item 6), with a real
`picobot gateway` process: another process holds the SQLite write lock past
the busy timeout during a turn; /ready says storage writes fail (not 200)
while /health stays 200; once the lock is released the accepted message is
answered exactly once, without a restart. And a home whose database cannot
be opened stops the start with one line and exit code 2."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from structlog.testing import capture_logs

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    PICOBOT,
    GatewayProcess,
    child_env,
    make_config,
    process_config,
    replies_written,
    running_gateway,
    spawn_gateway,
    wait_until,
    ws_client,
)

pytestmark = pytest.mark.slow

# holds the write lock of the database at argv[1] until a line comes on stdin
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


HELD_SECS = 20.0  # how long another process holds the write lock


def _config(llm: FakeOpenAI) -> dict[str, Any]:
    return process_config(llm.base_url)


async def _get(gw: GatewayProcess, path: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{gw.port}{path}") as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def _frames(ws: websockets.ClientConnection, into: list[dict[str, Any]]) -> None:
    async for raw in ws:
        into.append(json.loads(raw))


async def test_write_lock_held_by_another_process_then_released_answers_once_without_restart(
    home: Path, llm: FakeOpenAI
) -> None:
    gw = await spawn_gateway(_config(llm), home, child_env(home))
    db_path = home / "storage" / "sessions.db"
    frames: list[dict[str, Any]] = []
    locker: asyncio.subprocess.Process | None = None
    try:
        ws = await websockets.connect(gw.ws_url)
        await ws.send(json.dumps({"type": "hello", "chat_id": "locked-out"}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        reader = asyncio.create_task(_frames(ws, frames), name="frames")
        llm.hold()
        await ws.send(json.dumps({"type": "message", "id": "q1", "text": "question"}))
        await llm.wait_requests(1, timeout=10)  # accepted, its turn started and stored
        assert {"type": "ack", "id": "q1", "status": "accepted"} in frames

        locker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCKER, str(db_path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert locker.stdout is not None
        assert locker.stdin is not None
        assert await asyncio.wait_for(locker.stdout.readline(), 10) == b"locked\n"
        locked_at = time.monotonic()
        llm.release()  # the reply's commit now waits out the busy timeout (5 s), then fails

        async def not_ready() -> bool:
            status, body = await _get(gw, "/ready")
            return status == 503 and (
                "storage: writes failing: database is locked" in body.get("reasons", [])
            )

        await wait_until(not_ready, 30)
        assert (await _get(gw, "/health"))[0] == 200  # the loop is alive
        # held clearly past the busy timeout: the turn failed, and a retry's probe too
        await gw.wait_event("turn_waiting_for_storage", 30, count=2)
        assert not gw.events("turn_crashed")
        assert [f for f in frames if f["type"] == "message"] == []
        assert await not_ready()
        # the case: the lock held 20 s, four busy timeouts, not one
        await asyncio.sleep(max(0.0, HELD_SECS - (time.monotonic() - locked_at)))
        assert await not_ready()
        assert not gw.events("turn_crashed")

        locker.stdin.write(b"release\n")
        await locker.stdin.drain()
        assert await asyncio.wait_for(locker.wait(), 10) == 0

        await wait_until(lambda: [f for f in frames if f["type"] == "message"], 30)
        await gw.wait_event("storage_writes_recovered", 10)
        assert await _get(gw, "/ready") == (200, {"status": "ready"})
        assert await gw.stop() == 0
        await ws.close()
        await reader
    finally:
        if locker is not None and locker.returncode is None:
            locker.kill()
            await locker.wait()
        if gw.proc.returncode is None:
            await gw.stop()
    replies = [(f["reply_to"], f["text"]) for f in frames if f["type"] == "message"]
    assert replies == [("q1", "echo: question")]  # once, no restart in between

    async with Database(db_path) as db:
        inbox = await db.read(
            lambda c: c.execute("SELECT id, platform_id, state FROM inbox").fetchall()
        )
        outbox = await db.read(lambda c: c.execute("SELECT inbox_id, text FROM outbox").fetchall())
    assert [(r["platform_id"], r["state"]) for r in inbox] == [("locked-out/q1", "done")]
    assert [(r["inbox_id"], r["text"]) for r in outbox] == [(inbox[0]["id"], "echo: question")]


@pytest.mark.parametrize("broken", ["storage folder is a file", "database file is a folder"])
async def test_a_home_whose_database_cannot_be_opened_is_one_line_and_exit_2(
    home: Path, llm: FakeOpenAI, broken: str
) -> None:
    """What stops root as well as a normal user (chmod 0555 does not stop root)."""
    if broken == "storage folder is a file":
        (home / "storage").write_text("not a folder")
    else:
        (home / "storage" / "sessions.db").mkdir(parents=True)
    config = home / "config.json"
    config.write_text(json.dumps(_config(llm)))
    proc = await asyncio.create_subprocess_exec(
        PICOBOT, "gateway", "--config", str(config), env=child_env(home),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    lines = err.decode().splitlines()
    logged = [json.loads(line) for line in lines if line.startswith("{")]  # the json log
    [line] = [line for line in lines if not line.startswith("{")]
    assert line.startswith(f"picobot: cannot open the database {home}/storage/sessions.db: ")
    assert [r["event"] for r in logged if r["level"] in ("error", "critical")] == []


async def test_a_full_database_during_a_turn_takes_the_same_retry_path(
    home: Path, llm: FakeOpenAI
) -> None:
    """SQLITE_FULL (max_page_count; a full disk says the same) at the reply's
    commit: the turn waits for storage as for a lock, then is answered once."""
    big = " ".join(["words"] * 4000)  # the reply needs pages the file may not grow by
    llm.hold()
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw, "full-chat") as client,
    ):
        assert gw.db is not None
        assert gw.sessions is not None
        sessions = gw.sessions
        msg_id = await client.send(big)
        await llm.wait_requests(1, timeout=10)
        await gw.db.read(
            lambda c: c.execute(
                f"PRAGMA max_page_count={c.execute('PRAGMA page_count').fetchone()[0]}"
            )
        )
        with capture_logs() as logs:
            llm.release()
            await wait_until(lambda: sessions.waiting_for_storage == 1, 20)
        [failed] = [e for e in logs if e["event"] == "storage_commit_failed"]
        assert failed["reason"] == "database or disk is full"
        await gw.db.read(lambda c: c.execute("PRAGMA max_page_count=1073741823"))

        reply = await client.recv_type("message", timeout=30)
        assert reply["reply_to"] == msg_id
        assert reply["text"] == f"echo: {big}"
        await replies_written(gw)
        outbox = await gw.db.read(lambda c: c.execute("SELECT text FROM outbox").fetchall())
    assert [r["text"] for r in outbox] == [f"echo: {big}"]
