"""Access control end to end on Telegram: fake Bot API → real gateway → fake LLM.

Cast: an admin (gateway.admins), a family member (allow_from) and a stranger,
each in their own private chat (chat id = user id).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.bus import InboundMessage
from gateway.cli.pairing import add_pairing_parser, run_pairing_command
from gateway.config.loading import LoadedConfig
from gateway.i18n import Locale, Msg, tr
from storage.sql.delivery import inbox
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.support import make_config, newest, running_gateway

ADMIN, FAMILY, STRANGER = 1, 7, 42
CODE = re.compile(r"\b([A-Z2-9]{4}-[A-Z2-9]{4})\b")
UNKNOWN = "sender is no admin, not in channels.telegram.allow_from and not paired"


class Clock:
    """The gateway's clock for pairing codes, moved by the test."""

    def __init__(self) -> None:
        self.at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def access_config(home: Path, llm: FakeOpenAI, tg: FakeTelegram, **telegram: Any) -> LoadedConfig:
    section = tg.settings(**{"allow_from": [str(FAMILY)], **telegram})
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "telegram": section},
        gateway={"admins": [f"telegram:{ADMIN}"], "outbound_retry_base_secs": 0.05},
    )


def texts_to(tg: FakeTelegram, chat: int) -> list[str]:
    return [
        c.params["_visible"]
        for c in tg.calls_of("sendMessage")
        if c.params.get("_ok") and c.params["chat_id"] == str(chat)
    ]


async def say(tg: FakeTelegram, user: int, text: str) -> None:
    await tg.add_message(text, user_id=user, chat_id=user, username=None)


async def replies(tg: FakeTelegram, chat: int, count: int) -> list[str]:
    await tg.wait_for(lambda: len(texts_to(tg, chat)) >= count, timeout=10)
    return texts_to(tg, chat)


def asked(llm: FakeOpenAI) -> list[str]:
    return [newest(r)["content"] for r in llm.requests]


async def inbox_states(loaded: LoadedConfig, sender: int) -> list[str]:
    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT state FROM inbox WHERE sender_id = ? ORDER BY id", (str(sender),)
            ).fetchall()
        )
    return [r["state"] for r in rows]


async def pairing_cli(loaded: LoadedConfig, *argv: str) -> int:
    """`picobot pairing …` on the same database file, as from another process."""
    parser = argparse.ArgumentParser(prog="picobot")
    add_pairing_parser(parser.add_subparsers(dest="command"))
    return await run_pairing_command(parser.parse_args(["pairing", *argv]), loaded)


async def test_an_unknown_sender_is_refused_without_an_llm_call(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = access_config(home, llm, tg)
    with capture_logs() as logs:
        async with running_gateway(loaded):
            await say(tg, STRANGER, "hello?")
            await say(tg, STRANGER, "anyone there?")
            await say(tg, FAMILY, "hi, it's me")  # judged after the stranger's two
            assert await replies(tg, FAMILY, 1) == ["echo: hi, it's me"]
    assert asked(llm) == ["hi, it's me"]
    # one short reply an hour, with the id an admin needs
    [explained] = texts_to(tg, STRANGER)
    assert "telegram:42" in explained
    assert "admin" in explained
    assert await inbox_states(loaded, STRANGER) == ["done", "done"]
    refused = [e for e in logs if e["event"] == "access_refused"]
    assert [(e["sender_id"], e["reason"], e["replied"]) for e in refused] == [
        ("42", UNKNOWN, True),
        ("42", UNKNOWN, False),
    ]


async def test_a_pairing_code_approved_by_the_admin_lets_the_sender_in_until_revoked(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = Clock()
    loaded = access_config(home, llm, tg, pairing=True)
    async with running_gateway(loaded, clock=clock.now):
        await say(tg, STRANGER, "hello, I'm new here")
        [offer] = await replies(tg, STRANGER, 1)
        match = CODE.search(offer)
        assert match is not None, offer
        code = match.group(1)
        assert f"/pair approve {code}" in offer
        # Neither the stranger nor a member who is no admin can approve it.
        await say(tg, STRANGER, f"/pair approve {code}")
        await say(tg, FAMILY, f"/pair approve {code}")
        [not_admin] = await replies(tg, FAMILY, 1)
        assert not_admin.startswith("Only an admin can use /pair")
        # The admin approves from their own chat; the new user is told in theirs.
        await say(tg, ADMIN, f"/pair approve {code.lower().replace('-', '')}")
        [approved] = await replies(tg, ADMIN, 1)
        assert approved.startswith(f"Approved telegram:42 (code {code})")
        assert (await replies(tg, STRANGER, 2))[1] == tr(Locale.EN, Msg.APPROVED_NOTICE)
        await say(tg, STRANGER, "what can you do?")
        assert (await replies(tg, STRANGER, 3))[2] == "echo: what can you do?"
    async with running_gateway(loaded, clock=clock.now):  # the pairing is in the database
        await say(tg, STRANGER, "still there?")
        assert (await replies(tg, STRANGER, 4))[3] == "echo: still there?"
        assert await pairing_cli(loaded, "revoke", "telegram:42") == 0
        await say(tg, STRANGER, "and now?")
        await say(tg, FAMILY, "marker")
        await replies(tg, FAMILY, 2)
    assert asked(llm) == ["what can you do?", "still there?", "marker"]
    assert len(texts_to(tg, STRANGER)) == 4  # "and now?" refused; one code an hour at most
    assert await inbox_states(loaded, STRANGER) == ["done"] * 5


async def test_a_wrong_or_expired_code_is_refused(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = Clock()
    async with running_gateway(access_config(home, llm, tg, pairing=True), clock=clock.now):
        await say(tg, STRANGER, "hi")
        [offer] = await replies(tg, STRANGER, 1)
        match = CODE.search(offer)
        assert match is not None, offer
        code = match.group(1)
        wrong = code[:-1] + ("B" if code[-1] == "A" else "A")
        await say(tg, ADMIN, f"/pair approve {wrong}")
        assert (await replies(tg, ADMIN, 1))[0].startswith(f"No pending pairing code {wrong}")
        clock.advance(minutes=10, seconds=1)
        await say(tg, ADMIN, f"/pair approve {code}")
        assert (await replies(tg, ADMIN, 2))[1].startswith(f"Code {code} has expired")
        await say(tg, STRANGER, "let me in")
        await say(tg, FAMILY, "marker")
        await replies(tg, FAMILY, 1)
    assert asked(llm) == ["marker"]
    assert texts_to(tg, STRANGER) == [offer]


@pytest.mark.parametrize("refusal", ["explain", "silent"])
async def test_whoami_answers_everyone_and_refused_senders_unless_silent(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, refusal: str
) -> None:
    async with running_gateway(access_config(home, llm, tg, refusal=refusal)):
        await say(tg, STRANGER, "/whoami")
        await say(tg, FAMILY, "/whoami")
        await say(tg, ADMIN, "/whoami")
        [admin] = await replies(tg, ADMIN, 1)
        [family] = await replies(tg, FAMILY, 1)
    assert "You are telegram:1" in admin
    assert "Admin: yes" in admin
    assert "You are telegram:7" in family
    assert "Admin: no" in family
    assert "Access: yes (allow_from)" in family
    stranger = texts_to(tg, STRANGER)
    if refusal == "silent":
        assert stranger == []
    else:
        [who] = stranger
        assert "You are telegram:42" in who
        assert "Admin: no" in who
        assert "Access: no" in who
    assert llm.requests == []


async def test_a_group_not_listed_is_ignored_and_a_listed_one_needs_the_mention(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    groups = {"allow": ["-100"], "require_mention": True}
    loaded = access_config(home, llm, tg, allow_from=["*"], groups=groups)
    handle = f"@{BOT_USERNAME}"
    to_bot = f"{handle} hello"
    mention = [{"type": "mention", "offset": 0, "length": len(handle)}]
    group = {"chat_type": "supergroup", "user_id": STRANGER}
    async with running_gateway(loaded):
        await tg.add_message(to_bot, chat_id=-200, entities=mention, **group)  # not listed
        await tg.add_message("/whoami", chat_id=-200, **group)
        await tg.add_message("just chatting", chat_id=-100, **group)  # no mention
        await tg.add_message(to_bot, chat_id=-100, entities=mention, **group)
        assert await replies(tg, -100, 1) == ["echo: hello"]
    assert texts_to(tg, -200) == []
    assert asked(llm) == ["hello"]


async def test_a_listed_group_without_the_mention_rule_hears_everything(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    groups = {"allow": ["-100"], "require_mention": False}
    loaded = access_config(home, llm, tg, allow_from=["*"], groups=groups)
    async with running_gateway(loaded):
        await tg.add_message("just chatting", chat_id=-100, chat_type="group", user_id=FAMILY)
        assert await replies(tg, -100, 1) == ["echo: just chatting"]


async def test_an_admin_learns_the_id_of_a_group_that_is_not_served(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = access_config(home, llm, tg, groups={"allow": []})
    async with running_gateway(loaded):
        await tg.add_message("/whoami", chat_id=-300, chat_type="supergroup", user_id=ADMIN)
        [who] = await replies(tg, -300, 1)
    assert "Chat: -300 (group)" in who
    assert "Access: no: this group is not served" in who
    assert llm.requests == []


async def test_a_row_recorded_before_a_crash_is_judged_at_start(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = access_config(home, llm, tg)
    stranger = InboundMessage("telegram", "42", "42", "sneaking in", "42:1")
    async with Database(loaded.storage_path) as db:  # committed, then the process died
        await db.write(lambda c: inbox.record_inbound(c, stranger))
    async with running_gateway(loaded):
        [explained] = await replies(tg, STRANGER, 1)
    assert "telegram:42" in explained
    assert llm.requests == []
    assert await inbox_states(loaded, STRANGER) == ["done"]


async def test_an_unreadable_row_left_unfinished_is_set_aside_and_the_rest_answered(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = access_config(home, llm, tg, allow_from=["*"])
    waiting = InboundMessage("telegram", str(STRANGER), str(STRANGER), "still there?", "s:1")
    async with Database(loaded.storage_path) as db:  # a crash left two rows, one mangled
        await db.write(lambda c: inbox.record_inbound(c, waiting))
        await db.write(
            lambda c: c.execute(
                "INSERT INTO inbox (channel, platform_id, chat_id, sender_id, payload, received_at)"
                " VALUES ('telegram', 'bad:1', '7', '7', '{\"channel\": \"telegram\"', 'x')"
            )
        )
    with capture_logs() as logs:
        async with running_gateway(loaded):
            assert await replies(tg, STRANGER, 1) == ["echo: still there?"]
    assert [e["rows"] for e in logs if e["event"] == "inbox_rows_unreadable"] == [[2]]
    async with Database(loaded.storage_path) as db:
        letters = await db.read(
            lambda c: c.execute("SELECT platform_id, reason FROM dead_letters").fetchall()
        )
        states = await db.read(
            lambda c: c.execute("SELECT state FROM inbox ORDER BY id").fetchall()
        )
    assert [(r[0], r[1].split(":")[0]) for r in letters] == [
        ("bad:1", "inbox row 2 unreadable at start")
    ]
    assert [r[0] for r in states] == ["done", "done"]


async def test_the_hourly_refusal_reply_survives_a_restart(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = Clock()
    loaded = access_config(home, llm, tg)
    async with running_gateway(loaded, clock=clock.now):
        await say(tg, STRANGER, "hello?")
        assert len(await replies(tg, STRANGER, 1)) == 1
    clock.advance(minutes=30)
    async with running_gateway(loaded, clock=clock.now):  # the count is in the database
        await say(tg, STRANGER, "hello again?")
        await say(tg, FAMILY, "marker")  # judged after the stranger's
        await replies(tg, FAMILY, 1)
        assert len(texts_to(tg, STRANGER)) == 1
        clock.advance(minutes=30)  # an hour after the first reply
        await say(tg, STRANGER, "an hour later?")
        assert len(await replies(tg, STRANGER, 2)) == 2
    assert asked(llm) == ["marker"]
