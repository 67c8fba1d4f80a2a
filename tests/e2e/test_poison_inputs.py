"""Poison inputs never stall a channel (issue 15).

Each channel gets a text with a lone surrogate (answered, the surrogate
replaced by U+FFFD at the bus boundary) or a malformed event (a dead letter,
listed by `picobot dead-letters list`), then three messages from other chats,
each answered exactly once. A model's reply with a lone surrogate is
answered too (replaced at the provider), and so is a voice note whose
transcript has one (replaced where the transcript is read). Tool-call
arguments nested too deeply to read are a tool error the model reads, with
either provider and with a person asked first.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.feishu.webhook import WEBHOOK_PATH as FEISHU_PATH
from gateway.config.loading import LoadedConfig
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_attachments import send_voice_note, with_transcription
from tests.e2e.test_feishu import feishu_config, webhook_overrides
from tests.e2e.test_prompt_cache import anthropic_config
from tests.e2e.test_telegram import telegram_config
from tests.e2e.test_wechat import wechat_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.feishu_server import ENCRYPT_KEY, EventSender, FakeFeishu, encrypt, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWechat
from tests.support import PICOBOT, child_env, make_config, newest, running_gateway, ws_client

LONE = "\ud83d"  # half of a surrogate pair: not encodable as UTF-8
SHOWN = "poison \ufffd text"  # what the model sees and the echo carries back
OTHERS = ("first other", "second other", "third other")


def nested(depth: int) -> str:
    """Tool-call arguments as a model may write them, nested `depth` deep: past
    orjson's limit (255), past what recursive Python code takes (~500), past
    json's (RecursionError, not ValueError: ~1,000 deep on 3.11, ~10,000 on 3.13)."""
    return '{"path": ' + "[" * depth + "]" * depth + "}"


DEPTHS = pytest.mark.parametrize("depth", [300, 700, 20_000])


async def dead_letter_listing(loaded: LoadedConfig, home: Path) -> str:
    """`picobot dead-letters list`, run as the operator would."""
    path = home / "cli-config.json"
    path.write_text(json.dumps({"storage": {"path": str(loaded.storage_path)}}))
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "dead-letters",
        "list",
        "--config",
        str(path),
        env=child_env(home),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    return out.decode()


def assert_each_once(sent: list[str], expected: list[str]) -> None:
    assert sorted(sent) == sorted(expected)


@pytest.fixture
async def tg() -> Any:
    async with FakeTelegram() as fake:
        yield fake


def malformed_updates(tg: FakeTelegram) -> list[dict[str, Any]]:
    return [
        {"message": tg.message("x", chat_id=7) | {"chat": {"id": 7}}},  # chat without type
        {"message": tg.message("x", entities=[{"type": "bold", "length": 1}])},  # no offset
        {"message": "not a message"},
        {"message": tg.message("x") | {"date": "yesterday"}},
    ]


async def test_telegram_polling_skips_poison_updates(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg)
    async with running_gateway(loaded) as gw:
        await tg.add_message(f"poison {LONE} text", chat_id=10, user_id=10)
        bad_ids = [(await tg.add_update(u))["update_id"] for u in malformed_updates(tg)]
        for n, text in enumerate(OTHERS):
            await tg.add_message(text, chat_id=20 + n, user_id=20 + n)
        await tg.wait_for(lambda: len(tg.sent_texts) >= 4, timeout=15)
        assert gw.readiness() == []
    assert_each_once(tg.sent_texts, [f"echo: {SHOWN}", *(f"echo: {t}" for t in OTHERS)])
    listing = await dead_letter_listing(loaded, home)
    lines = [line.split("\t") for line in listing.splitlines()]
    assert sorted(int(cols[3]) for cols in lines) == bad_ids
    assert {cols[2] for cols in lines} == {"telegram"}


async def test_telegram_webhook_dead_letters_poison_updates(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(
        home,
        llm,
        tg,
        mode="webhook",
        webhook_url="https://bot.example.test/webhooks/telegram",
        secret_token="s3cret",
    )
    good = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
    async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
        url = f"{gw.base_url}/webhooks/telegram"
        updates = [
            {"message": tg.message(f"poison {LONE} text", chat_id=10)},
            *malformed_updates(tg),
            *({"message": tg.message(t, chat_id=20 + n)} for n, t in enumerate(OTHERS)),
        ]
        for n, update in enumerate(updates):
            body = json.dumps({"update_id": 500 + n, **update})  # escapes the surrogate
            for _ in range(2):  # Telegram redelivers: the same definitive answer
                async with http.post(url, data=body, headers=good) as resp:
                    assert resp.status == 200
        async with http.post(
            url, data="{}", headers={**good, "X-Telegram-Bot-Api-Secret-Token": "s3cret\u00e9"}
        ) as resp:
            assert resp.status == 403
        await tg.wait_for(lambda: len(tg.sent_texts) >= 4, timeout=15)
    assert_each_once(tg.sent_texts, [f"echo: {SHOWN}", *(f"echo: {t}" for t in OTHERS)])
    listing = await dead_letter_listing(loaded, home)
    # each malformed update kept (once per delivery), none of the good ones
    ids = sorted(int(line.split("\t")[3]) for line in listing.splitlines())
    assert ids == sorted([501, 501, 502, 502, 503, 503, 504, 504])


@pytest.fixture
async def fs() -> Any:
    async with FakeFeishu() as fake:
        yield fake


async def test_feishu_webhook_surrogate_and_non_ascii_signature(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    loaded = feishu_config(home, llm, fs, **webhook_overrides())
    async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
        url = gw.base_url + FEISHU_PATH
        sender = EventSender(url, ENCRYPT_KEY)
        forged = {
            "X-Lark-Request-Timestamp": str(int(time.time())),
            "X-Lark-Request-Nonce": "n",
            "X-Lark-Signature": "s\u00e9gnature\u4e2d",
        }
        sealed = encrypt(ENCRYPT_KEY, json.dumps(message_event("forged", chat_id="oc_forged")))
        body = json.dumps({"encrypt": sealed}).encode()
        async with http.post(url, data=body, headers=forged) as resp:
            assert resp.status == 401
        event = message_event(f"poison {LONE} text", chat_id="oc_poison")
        assert await sender.post(event) == (200, {"msg": "success"})
        bad = message_event("x", chat_id="oc_bad")
        bad["event"]["message"] = "not a message object"
        assert (await sender.post(bad))[0] == 200
        for n, text in enumerate(OTHERS):
            assert (await sender.post(message_event(text, chat_id=f"oc_{n}")))[0] == 200
        await fs.wait_until(lambda: len(fs.sent) >= 4, 15)
    assert_each_once([s.text for s in fs.sent], [f"echo: {SHOWN}", *(f"echo: {t}" for t in OTHERS)])
    listing = await dead_letter_listing(loaded, home)
    [line] = listing.splitlines()
    assert line.split("\t")[2:4] == ["feishu", bad["header"]["event_id"]]


async def test_feishu_long_connection_surrogate_and_malformed_event(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    loaded = feishu_config(home, llm, fs)
    async with running_gateway(loaded):
        poison = await fs.push_event(message_event(f"poison {LONE} text", chat_id="oc_p"))
        bad = message_event("x")
        bad["event"]["message"] = "not a message object"
        malformed = await fs.push_event(bad)
        frames = [
            await fs.push_event(message_event(t, chat_id=f"oc_{n}")) for n, t in enumerate(OTHERS)
        ]
        await fs.wait_until(lambda: len(fs.sent) >= 4 and all(f in fs.acks for f in frames), 15)
    assert fs.acks[poison] == fs.acks[malformed] == 200
    assert_each_once([s.text for s in fs.sent], [f"echo: {SHOWN}", *(f"echo: {t}" for t in OTHERS)])
    assert "\tfeishu\t" in await dead_letter_listing(loaded, home)


async def test_wechat_surrogate_text_is_answered(home: Path, llm: FakeOpenAI) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        async with running_gateway(wechat_config(home, llm, fake)):
            await fake.add_message("poison@im.wechat", f"poison {LONE} text")
            for n, text in enumerate(OTHERS):
                await fake.add_message(f"user{n}@im.wechat", text)
            await fake.wait_for(lambda: len(fake.sent) >= 4, timeout=15)
        assert_each_once(
            [m.text for m in fake.sent], [f"echo: {SHOWN}", *(f"echo: {t}" for t in OTHERS)]
        )


async def test_websocket_surrogate_text_is_answered(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with ws_client(gw, "poison-chat") as client:
            # the escape is valid JSON but not valid Unicode once decoded
            await client.ws.send('{"type": "message", "id": "p1", "text": "poison \\ud83d text"}')
            ack = await client.recv_type("ack")
            assert (ack["id"], ack["status"]) == ("p1", "accepted")
            reply = await client.recv_type("message")
            assert reply["text"] == f"echo: {SHOWN}"
        for n, text in enumerate(OTHERS):
            async with ws_client(gw, f"other-{n}") as other:
                assert await other.ask(text) == f"echo: {text}"


async def test_a_model_reply_with_half_a_surrogate_pair_is_delivered(
    home: Path, llm: FakeOpenAI
) -> None:
    """The service sends the half as an escape: the reply is stored and
    delivered with U+FFFD in its place, and the chat goes on (before, the
    turn crashed on storing it and no reply came at all)."""
    llm.add_text(f"model {LONE} half")
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw, "model-poison") as client,
    ):
        assert await client.ask("hi") == "model \ufffd half"
        assert await client.ask("again") == "echo: again"


async def test_a_voice_note_whose_transcript_has_half_a_surrogate_pair_is_answered(
    home: Path, llm: FakeOpenAI
) -> None:
    """The speech service sends the half as an escape: the user message says
    U+FFFD in its place, the note is answered, and the next one too (before,
    storing the user message crashed the turn: no reply, and the same crash
    at every start, since the message stayed unanswered)."""
    ogg = b"OggS\x00poison-voice-note"
    llm.transcripts[ogg] = f"water {LONE} the plants"
    async with (
        FakeTelegram() as tg,
        running_gateway(with_transcription(telegram_config(home, llm, tg))),
    ):
        await send_voice_note(tg, ogg)
        await tg.add_message("and now?")
        await tg.wait_for(lambda: len(tg.sent_texts) >= 2, timeout=10)
    assert "Transcript: water \ufffd the plants" in tg.sent_texts[0]
    assert tg.sent_texts[1] == "echo: and now?"


async def tool_frames(home: Path, llm: FakeOpenAI, arguments: str, reply: str) -> list[Any]:
    """The model calls `write` with `arguments`, then says `reply`: the chat's
    two tool frames of the call; the chat goes on after."""
    llm.add_tool_call("write", arguments)
    llm.add_text(reply)
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw, "odd-args") as client,
    ):
        await client.send("write it")
        frames = [await client.recv_type("tool") for _ in range(2)]
        assert str((await client.recv_type("message"))["text"]) == reply
        assert await client.ask("again") == "echo: again"
    return frames


async def held_request(home: Path, llm: FakeOpenAI, arguments: str) -> str:
    """The model calls `write` with `arguments` under `outside_workspace`: the
    approval request's text; `/deny` then lets the model go on."""
    llm.add_tool_call("write", arguments)
    llm.add_text("All right, I left it.")
    rules = {"write": "outside_workspace"}
    loaded = make_config(home, llm.base_url, tools={"approval": {"tools": rules}})
    async with running_gateway(loaded) as gw, ws_client(gw, "odd-held") as client:
        await client.send("write it")
        ask = str((await client.recv_type("message"))["text"])
        await client.send("/deny")
        assert str((await client.recv_type("message"))["text"]) == "All right, I left it."
    assert newest(llm.requests[1])["content"].startswith("[denied by user")
    return ask


@DEPTHS
async def test_tool_arguments_nested_too_deeply_are_a_tool_error(
    home: Path, llm: FakeOpenAI, depth: int
) -> None:
    """The model reads a tool error and the chat its tool frames. Before,
    past what Python recurses (700) the frames never came, and past what
    json reads (20,000) the turn failed with the generic error."""
    frames = await tool_frames(home, llm, nested(depth), "That did not work.")
    assert [(f["name"], f["status"]) for f in frames] == [("write", "running"), ("write", "error")]
    assert "[[[[" in frames[0]["summary"]
    error = newest(llm.requests[1])["content"]
    if depth < 1_000:  # json reads it: the tool's own check refuses it
        assert error.startswith("Error: invalid arguments: path: Input should be a valid string")
    else:
        assert error == "Error: arguments are nested too deeply"


@DEPTHS
async def test_tool_arguments_nested_too_deeply_are_held_for_a_person(
    home: Path, llm: FakeOpenAI, depth: int
) -> None:
    """`outside_workspace` cannot tell where such a call writes: it asks, and
    the request shows the arguments cut short (before, at 700 and 20,000, the
    turn failed with the generic error)."""
    ask = await held_request(home, llm, nested(depth))
    assert "Approval needed" in ask
    assert "• write: " in ask
    assert "[[[[" in ask
    assert len(ask) < 2_000


@DEPTHS
async def test_anthropic_tool_input_nested_too_deeply_does_not_stick_the_chat(
    home: Path, depth: int
) -> None:
    """Every later request carries the call's input as `raw_arguments`: a
    service's parser may refuse JSON that deep, and the chat would be stuck.
    Before, 300 and 700 went out nested, and 20,000 failed the turn."""
    async with FakeAnthropic() as claude:
        claude.add_tool_call("write", nested(depth), call_id="toolu_1")
        claude.add_text("That did not work.")
        claude.add_text("Still here.")
        async with (
            running_gateway(anthropic_config(home, claude)) as gw,
            ws_client(gw, "deep-claude") as client,
        ):
            assert await client.ask("write it") == "That did not work."
            assert await client.ask("again") == "Still here."
        third = claude.requests[2]
    call = next(
        block
        for message in third["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    )
    assert call["input"] == {"raw_arguments": nested(depth)}


# half a pair written as an escape: valid JSON, a lone surrogate once read
HALF_ESCAPED = r'{"path": "n.txt", "content": "half \ud83d here"}'


async def test_tool_arguments_with_half_a_surrogate_pair_write_u_fffd(
    home: Path, llm: FakeOpenAI
) -> None:
    """Before, the write failed ('the tool failed unexpectedly') and the
    chat's tool frames could not be sent."""
    frames = await tool_frames(home, llm, HALF_ESCAPED, "Written.")
    assert [f["status"] for f in frames] == ["running", "ok"]
    assert "half \ufffd here" in frames[0]["summary"]
    assert (home / "workspace" / "n.txt").read_text(encoding="utf-8") == "half \ufffd here"


async def test_tool_arguments_with_half_a_surrogate_pair_can_be_held(
    home: Path, llm: FakeOpenAI
) -> None:
    """Before, the approval request could not be stored: the turn crashed."""
    ask = await held_request(home, llm, HALF_ESCAPED.replace("n.txt", "../n.txt"))
    assert "half \ufffd here" in ask
