"""The console's conversations view (gateway/console/conversations.py)
against a scripted run: chats on the WebSocket channel through the fake LLM,
one with a tool call, a sub-agent and a /compact. What the API lists, finds
and shows is what the database holds; archive and delete change it, through
/archive's and /delete's code, refused while a turn runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import structlog

from agent.compaction_prompt import SUMMARY_SYSTEM_PROMPT
from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import make_config, running_gateway, wait_until, ws_client

API = "/api/ops/conversations"
CHILD = "task:alpha:call-sub"
ALPHA_ASKED = [
    "what is 6*7? use the calculator",
    "look around please",
    "third turn " + "x" * 100,
    "after the compaction",
]
BETA_ASKED = "Hello from bob: 100% of wild_cards"


async def _summarise(body: dict[str, Any]) -> Reply | None:
    first = body["messages"][0]
    if first["role"] == "system" and first["content"] == SUMMARY_SYSTEM_PROMPT:
        return Reply(text="a summary of alpha")
    return None


async def _scripted_run(gw: Gateway, llm: FakeOpenAI) -> None:
    """alpha (alice): a calculator call, a sub-agent, a compaction and one
    turn after it; beta (bob): one plain turn."""
    llm.add_tool_call("calculator", {"expression": "6*7"}, call_id="call-calc")
    llm.add_text("6 times 7 is 42.")
    llm.add_tool_call(
        "task",
        {"description": "look", "prompt": "look around", "subagent_type": "explore"},
        call_id="call-sub",
    )
    llm.add_text("the child found it")
    llm.add_text("done looking")
    async with ws_client(gw, "alpha") as alpha:
        assert await alpha.ask(ALPHA_ASKED[0], sender_id="alice") == "6 times 7 is 42."
        assert await alpha.ask(ALPHA_ASKED[1], sender_id="alice") == "done looking"
        await alpha.ask(ALPHA_ASKED[2], sender_id="alice")
        assert (await alpha.ask("/compact", sender_id="alice")).startswith("Compacted")
        await alpha.ask(ALPHA_ASKED[3], sender_id="alice")
    async with ws_client(gw, "beta") as beta:
        await beta.ask(BETA_ASKED, sender_id="bob")


async def _rows(gw: Gateway, sql: str, *args: object) -> list[tuple[Any, ...]]:
    assert gw.store is not None
    found = await gw.store.db.read(lambda c: c.execute(sql, args).fetchall())
    return [tuple(r) for r in found]


async def _get(http: aiohttp.ClientSession, url: str, status: int = 200) -> Any:
    async with http.get(url) as response:
        body = await response.json()
        assert response.status == status, body
        return body


def _config(home: Path, llm: FakeOpenAI) -> Any:
    return make_config(
        home, llm.base_url, agents={"default": {"compaction": {"keep_user_turns": 1}}}
    )


async def test_list_search_and_transcripts_are_what_the_database_holds(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.responder = _summarise
    async with running_gateway(_config(home, llm)) as gw, aiohttp.ClientSession() as http:
        await _scripted_run(gw, llm)
        base = gw.base_url + API

        # the list: every session but sub-agents', newest activity first
        listed = (await _get(http, base))["sessions"]
        stored = await _rows(
            gw,
            "SELECT id, channel, chat_id, status, segment, updated_at, "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id "
            "AND m.segment = s.segment) FROM sessions s WHERE channel != 'subagent' "
            "ORDER BY updated_at DESC, id",
        )
        fields = ("id", "channel", "chat_id", "status", "segment", "updated_at", "message_count")
        assert [tuple(s[f] for f in fields) for s in listed] == stored
        assert [s["id"] for s in listed] == ["beta", "alpha"]
        assert listed[0]["preview"] == BETA_ASKED
        assert listed[1]["preview"] == ALPHA_ASKED[3]
        assert all(s["current"] for s in listed)

        async def ids(**query: str) -> list[str]:
            url = base + "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items())
            return [s["id"] for s in (await _get(http, url))["sessions"]]

        # found by channel, user (a sender) and text; wildcards are literal
        assert await ids(channel="websocket") == ["beta", "alpha"]
        assert await ids(channel="subagent") == [CHILD]
        assert await ids(channel="telegram") == []
        assert await ids(user="alice") == ["alpha"]
        assert await ids(user="bob") == ["beta"]
        assert await ids(user="beta") == ["beta"]  # the chat id
        assert await ids(q="6 TIMES 7") == ["alpha"]  # any case
        assert await ids(q="a summary of alpha") == ["alpha"]  # summaries are searched too
        assert await ids(q="%") == ["beta"]
        assert await ids(q="_") == ["beta"]
        assert await ids(q="x" * 100) == ["alpha"]
        assert await ids(q="nowhere said") == []
        assert await ids(user="alice", q="hello") == []

        # a page at a time: the cursor carries on where the page ended
        first = await _get(http, base + "?limit=1")
        second = await _get(http, base + "?limit=1&cursor=" + first["cursor"])
        assert [s["id"] for s in first["sessions"] + second["sessions"]] == ["beta", "alpha"]
        assert second["cursor"] is None
        for bad in ("limit=0", "limit=101", "limit=x", "cursor=nonsense", "q=" + "y" * 201):
            assert "error" in await _get(http, f"{base}?{bad}", 400), bad

        # alpha's transcript: every message once, where it was written
        shown = await _get(http, f"{base}/alpha")
        assert shown["session"]["id"] == "alpha"
        assert shown["session"]["segment"] == 1
        assert shown["before"] is None
        entries = shown["entries"]
        texts = dict(
            await _rows(gw, "SELECT seq, content FROM messages WHERE session_id = 'alpha'")
        )
        assert all(texts[e["seq"]] == e["text"] for e in entries)
        assert [e["text"] for e in entries if e["kind"] == "user"] == ALPHA_ASKED
        kinds = [e["kind"] for e in entries]
        assert kinds.count("compaction") == 1
        compaction = entries[kinds.index("compaction")]
        assert compaction["text"].endswith("a summary of alpha")
        assert compaction["segment"] == 1
        before, after = entries[: kinds.index("compaction")], entries[kinds.index("compaction") :]
        assert all(e["segment"] == 0 for e in before)
        assert [e["text"] for e in after if e["kind"] == "user"] == [ALPHA_ASKED[3]]
        seg0 = await _rows(
            gw, "SELECT seq FROM messages WHERE session_id = 'alpha' AND segment = 0"
        )
        assert sorted(e["seq"] for e in before) == sorted(r[0] for r in seg0)

        calls = {c["name"]: c for e in entries for c in e.get("tool_calls", [])}
        assert calls["calculator"]["id"] == "call-calc"
        assert '"6*7"' in calls["calculator"]["arguments"]
        assert calls["calculator"]["subagent"] is None
        assert calls["task"]["subagent"] == CHILD
        results = {e["tool_call_id"]: e["text"] for e in entries if e["kind"] == "tool"}
        assert results["call-calc"] == "42"
        assert results["call-sub"] == "the child found it"
        assert [c["id"] for c in shown["children"]] == [CHILD]
        assert shown["children"][0]["call_id"] == "call-sub"

        # a page at a time, older pages before the newer
        pages: list[dict[str, Any]] = []
        page = await _get(http, f"{base}/alpha?limit=4")
        pages = page["entries"]
        while page["before"] is not None:
            page = await _get(http, f"{base}/alpha?limit=4&before={page['before']}")
            pages = page["entries"] + pages
        assert pages == entries

        # the sub-agent's transcript, by its id (with the parent's in it)
        child = await _get(http, f"{base}/{quote(CHILD, safe='')}")
        stored_child = await _rows(
            gw, "SELECT seq, role, content FROM messages WHERE session_id = ? ORDER BY seq", CHILD
        )
        assert [(e["seq"], e["text"]) for e in child["entries"]] == [
            (r[0], r[2]) for r in stored_child
        ]
        assert child["entries"][-1]["text"] == "the child found it"

        missing = await _get(http, f"{base}/{quote('no such#1', safe='')}", 404)
        assert missing == {"error": "no session 'no such#1'"}
        slashed = await _get(http, f"{base}/{quote('api:a/b', safe='')}", 404)
        assert slashed == {"error": "no session 'api:a/b'"}


async def test_archive_and_delete_change_the_database_and_wait_for_a_running_turn(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.responder = _summarise
    async with running_gateway(_config(home, llm)) as gw, aiohttp.ClientSession() as http:
        await _scripted_run(gw, llm)
        base = gw.base_url + API

        async def status(method: str, path: str) -> tuple[int, Any]:
            async with http.request(method, base + path) as response:
                return response.status, await response.json()

        with structlog.testing.capture_logs() as logs:
            assert await status("POST", "/beta/archive") == (
                200,
                {"archived": "beta", "fresh": "beta#2"},
            )
        assert await _rows(gw, "SELECT id, status FROM sessions WHERE chat_id = 'beta'") == [
            ("beta", "archived"),
            ("beta#2", "active"),
        ]
        assert await _rows(gw, "SELECT session_id FROM chat_bindings WHERE chat_id = 'beta'") == [
            ("beta#2",)
        ]
        logged = [e for e in logs if e["event"] == "console_action"]
        assert logged == [
            {
                "event": "console_action",
                "log_level": "info",
                "action": "conversations.archive",
                "by": "operator",
                "target": {"session": "beta"},
                "status": 200,
            }
        ]
        assert (await status("POST", "/beta/archive"))[0] == 409  # already archived
        assert (await status("POST", "/nope/archive"))[0] == 404
        # a sub-agent's transcript goes with its parent
        assert (await status("DELETE", "/" + quote(CHILD, safe="")))[0] == 409
        assert (await status("DELETE", "/nope"))[0] == 404

        # deleting alpha takes its messages and its sub-agent's transcript
        code, body = await status("DELETE", "/alpha")
        assert (code, body) == (200, {"deleted": "alpha", "fresh": "alpha#2"})
        assert await _rows(gw, "SELECT id FROM sessions WHERE id = 'alpha' OR id = ?", CHILD) == []
        assert await _rows(gw, "SELECT 1 FROM messages WHERE session_id = 'alpha'") == []
        assert await _rows(gw, "SELECT 1 FROM messages WHERE session_id = ?", CHILD) == []
        assert (await status("GET", "/alpha"))[0] == 404

        # while a turn runs in its chat, a session is neither archived nor deleted
        llm.hold()
        async with ws_client(gw, "gamma") as gamma:
            seen = len(llm.requests)
            asked = await gamma.send("a long one")
            await llm.wait_requests(seen + 1)
            for method, path in (("POST", "/gamma/archive"), ("DELETE", "/gamma")):
                code, body = await status(method, path)
                assert code == 409, body
                assert "running" in body["error"]
            assert await _rows(gw, "SELECT status FROM sessions WHERE id = 'gamma'") == [
                ("active",)
            ]
            llm.release()
            reply = await gamma.recv_type("message")
            assert reply["reply_to"] == asked
        sessions = gw.sessions
        assert sessions is not None
        await wait_until(lambda: not sessions.is_busy("websocket", "gamma"))
        assert (await status("DELETE", "/gamma"))[0] == 200
        assert await _rows(gw, "SELECT id FROM sessions WHERE chat_id = 'gamma'") == [("gamma#2",)]
