"""Platform outages never lose a reply (DESIGN §4.6): rows end by time, not by
attempt count; a channel whose platform stops answering is degraded, holds its
rows and probes; when the platform answers again every held reply goes out
once, in order per chat.

The outages here are counted in refused calls, not seconds: with
`outbound_retry_max_secs` at 0.3 s, twelve refused sends take a few seconds
and run through the whole capped backoff several times, and twelve is more
than the eight attempts after which the old attempt count gave a reply up.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from channels.base import TransientSendError
from gateway.app import Gateway
from gateway.cli import main as picobot_main
from gateway.config.loading import LoadedConfig
from tests.fakes.feishu_server import FakeFeishu, config_dict, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, running_gateway

OLD_ATTEMPT_BUDGET = 8  # `gateway.outbound_max_attempts` before it was retired
OUTAGE_CALLS = 12
FAST_RETRIES = {"outbound_retry_base_secs": 0.05, "outbound_retry_max_secs": 0.3}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def telegram_config(home: Path, llm: FakeOpenAI, tg: FakeTelegram, **gateway: Any) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "telegram": tg.settings()},
        gateway={**FAST_RETRIES, **gateway},
    )


async def rows(gw: Gateway, where: str = "1") -> list[dict[str, Any]]:
    assert gw.db is not None
    found = await gw.db.read(
        lambda c: c.execute(f"SELECT * FROM outbox WHERE {where} ORDER BY id").fetchall()
    )
    return [dict(r) for r in found]


async def until_rows(gw: Gateway, where: str, count: int, timeout: float = 20.0) -> None:
    """Until `count` outbox rows match (a commit in the gateway has no event to await)."""
    async with asyncio.timeout(timeout):
        while len(await rows(gw, where)) < count:
            await asyncio.sleep(0.02)


async def until_degraded(gw: Gateway, channel: str, timeout: float = 10.0) -> str:
    """Until /ready reports `channel`'s sending degraded; that reason."""
    prefix = f"channel {channel}: sending degraded"
    async with asyncio.timeout(timeout):
        while not (found := [r for r in gw.readiness() if r.startswith(prefix)]):
            await asyncio.sleep(0.02)
    return found[0]


async def get(gw: Gateway, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(gw.base_url + path) as resp:
        return resp.status, await resp.text()


def degraded_gauge(metrics: str, channel: str) -> float:
    match = re.search(
        rf'^picobot_channel_send_degraded{{channel="{channel}"}} (\S+)$', metrics, re.M
    )
    assert match is not None, "no degraded gauge for " + channel
    return float(match.group(1))


def texts_to(tg: FakeTelegram, chat_id: int) -> list[str]:
    return [
        c.params["_visible"]
        for c in tg.calls_of("sendMessage")
        if c.params.get("_ok") and c.params["chat_id"] == str(chat_id)
    ]


async def test_telegram_outage_then_recovery_delivers_each_reply_once_in_order(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    tg.start_outage("sendMessage")
    with capture_logs() as logs:
        async with running_gateway(telegram_config(home, llm, tg)) as gw:
            for n, text in enumerate(("one", "two", "three"), 1):
                await tg.add_message(text, chat_id=42, user_id=42)
                await until_rows(gw, "1", n)  # its own turn, its reply queued
            await tg.add_message("elsewhere", chat_id=43, user_id=43)
            await until_rows(gw, "1", 4)
            await tg.wait_for(lambda: len(tg.refused("sendMessage")) >= OUTAGE_CALLS, 30)
            assert OUTAGE_CALLS > OLD_ATTEMPT_BUDGET

            status, body = await get(gw, "/ready")
            assert status == 503
            [reason] = [r for r in json.loads(body)["reasons"] if "degraded" in r]
            assert reason.startswith("channel telegram: sending degraded since ")
            assert "Bad Gateway" in reason
            assert degraded_gauge((await get(gw, "/metrics"))[1], "telegram") == 1.0
            assert await rows(gw, "state != 'pending'") == []  # nothing given up

            tg.end_outage()
            await tg.wait_for(lambda: len(tg.sent_texts) >= 4, 20)
            assert gw.dispatcher is not None
            assert await gw.dispatcher.flush(5)
            assert await get(gw, "/ready") == (200, '{"status": "ready"}')
            assert degraded_gauge((await get(gw, "/metrics"))[1], "telegram") == 0.0
            outbox = await rows(gw)
    assert texts_to(tg, 42) == ["echo: one", "echo: two", "echo: three"]
    assert texts_to(tg, 43) == ["echo: elsewhere"]
    assert len(tg.sent_texts) == 4  # each once
    assert [r["state"] for r in outbox] == ["sent"] * 4
    # one warning for the whole outage, however many sends it refused
    warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert warnings == ["outbound_channel_degraded"]
    [recovered] = [e for e in logs if e["event"] == "outbound_channel_recovered"]
    assert (recovered["target"], recovered["rows"]) == ("telegram", 3)  # held, then all due


async def test_feishu_outage_then_recovery_delivers_each_reply_once_in_order(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeFeishu() as fs:
        section = config_dict(fs.base_url, ws_ping_interval_secs=5.0, ws_reconnect_base_secs=0.05)
        loaded = make_config(
            home,
            llm.base_url,
            channels={"websocket": {"enabled": False}, "feishu": section},
            gateway=FAST_RETRIES,
        )
        fs.start_outage("POST", "/open-apis/im/v1/messages")
        async with running_gateway(loaded) as gw:
            for n in range(1, 4):
                await fs.push_event(message_event(f"q{n}", chat_id="oc_a", message_id=f"om_{n}"))
                await until_rows(gw, "1", n)
            await fs.wait_until(lambda: len(replies(fs.refused)) >= OUTAGE_CALLS, 30)
            assert any("channel feishu: sending degraded" in r for r in gw.readiness())
            assert await rows(gw, "state != 'pending'") == []

            fs.end_outage()
            await fs.wait_until(lambda: len(fs.sent) >= 3, 20)
            assert gw.dispatcher is not None
            assert await gw.dispatcher.flush(5)
            assert gw.readiness() == []
            outbox = await rows(gw)
    assert [(s.target, s.text) for s in fs.sent] == [
        ("om_1", "echo: q1"),
        ("om_2", "echo: q2"),
        ("om_3", "echo: q3"),
    ]
    assert [r["state"] for r in outbox] == ["sent"] * 3
    # each once: Feishu's idempotency key would hide a second send, so count the calls
    assert len(replies(fs.requests)) - len(replies(fs.refused)) == 3


def replies(calls: list[tuple[str, str]]) -> list[str]:
    return [path for method, path in calls if method == "POST" and path.endswith("/reply")]


async def test_blocked_by_the_user_fails_at_once_and_other_chats_keep_flowing(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    tg.fail_next(
        "sendMessage",
        403,
        "Forbidden: bot was blocked by the user",
        when=lambda call: call.params.get("chat_id") == "77",
        times=5,
    )
    async with running_gateway(telegram_config(home, llm, tg)) as gw:
        await tg.add_message("are you there?", chat_id=77, user_id=77)
        await until_rows(gw, "state = 'failed'", 1)
        for n in range(3):
            await tg.add_message(f"hi {n}", chat_id=42, user_id=42)
            await tg.wait_for(lambda: len(tg.sent_texts) >= n + 1, 10)  # noqa: B023
        assert gw.readiness() == []  # a refusal is an answer: no outage
        [failed] = await rows(gw, "state = 'failed'")
    assert failed["chat_id"] == "77"
    assert failed["attempts"] == 1
    assert "bot was blocked by the user" in failed["last_error"]
    assert len(tg.refused("sendMessage")) == 1  # never retried
    assert texts_to(tg, 42) == ["echo: hi 0", "echo: hi 1", "echo: hi 2"]


async def test_a_reply_not_delivered_within_the_give_up_time_fails_saying_so(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    """Two replies are refused (the channel degrades), a third is queued while
    it is degraded and never tried: at 2 s all three are given up, the third
    without an attempt of its own. The base backoff is 4 s, so the probe after
    the degradation comes 4-8 s later, when all three are out of time (with
    1 s it came 1-2 s later, and one that came between the first rows' give-up
    and the third's tried the third)."""
    tg.start_outage("sendMessage")
    loaded = telegram_config(
        home,
        llm,
        tg,
        outbound_retry_base_secs=4,
        outbound_retry_max_secs=100,
        outbound_give_up_after_secs=2,
    )
    async with running_gateway(loaded) as gw:
        await tg.add_message("first", chat_id=42, user_id=42)
        await tg.add_message("second", chat_id=43, user_id=43)
        await until_degraded(gw, "telegram")
        await tg.add_message("third", chat_id=44, user_id=44)
        await until_rows(gw, "state = 'failed'", 3)
        failed = await rows(gw, "state = 'failed'")
        _, metrics = await get(gw, "/metrics")
    by_chat = {r["chat_id"]: r for r in failed}
    assert sorted(by_chat) == ["42", "43", "44"]
    for row in failed:
        assert row["last_error"].startswith("gave up: not delivered within 2 s of being queued")
        assert "outbound_give_up_after_secs" in row["last_error"]
        assert "Bad Gateway" in row["last_error"]
    assert by_chat["44"]["attempts"] == 0  # held while degraded, then out of time
    assert 'picobot_outbound_failed_total{channel="telegram"} 3.0' in metrics
    assert tg.sent_texts == []


async def test_a_degraded_channel_holds_new_replies_until_it_answers_again(
    home: Path, llm: FakeOpenAI, capsys: Any
) -> None:
    """Probing paused far away (30 s base): two refused sends degrade the
    channel, and the replies that follow are not tried at all; a restart
    tries everything again at once, in order."""
    channel = RecordingChannel()
    channel.fail_forever = TransientSendError("platform down")
    loaded = make_config(home, llm.base_url, gateway={"outbound_retry_base_secs": 30})
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        await channel.submit("c1", "a", message_id="m1")
        await channel.submit("c2", "b", message_id="m2")
        await channel.wait_attempts(2)
        await until_degraded(gw, "rec")
        for n in range(3, 6):
            await channel.submit(f"c{n}", "later", message_id=f"m{n}")
        await until_rows(gw, "1", 5)
        assert gw.dispatcher is not None
        assert await gw.dispatcher.flush(5)  # nothing is due before the probe: no wait
        assert len(channel.attempts) == 2  # the later replies spent no attempt
        held = await rows(gw, "chat_id IN ('c3', 'c4', 'c5')")
        assert [r["attempts"] for r in held] == [0, 0, 0]
        assert all(r["next_attempt_at"] is not None for r in held)

        config_file = home / "config.json"
        config_file.write_text(json.dumps({"storage": {"path": str(loaded.storage_path)}}))
        capsys.readouterr()
        argv = ["outbox", "list", "--config", str(config_file)]
        assert await asyncio.to_thread(picobot_main, argv) == 0
        listing = [line for line in capsys.readouterr().out.splitlines() if "\tpending\t" in line]
        assert len(listing) == 5
        assert all(re.search(r"\tage=\d+ s\tnext=in \d+ (s|min)\t", line) for line in listing)

    channel.fail_forever = None
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        sent = await channel.wait_sent(5)
        assert gw.dispatcher is not None
        assert await gw.dispatcher.flush(5)
    ids = [s.message.outbox_id for s in sent]
    assert ids == sorted(ids)  # oldest first
    assert len(set(ids)) == len(channel.sent) == 5


@pytest.mark.parametrize(("notice_secs", "noted"), [(0.05, True), (0, False)])
async def test_a_late_reply_says_so_unless_turned_off(
    home: Path, llm: FakeOpenAI, notice_secs: float, noted: bool
) -> None:
    channel = RecordingChannel()
    channel.fail_forever = TransientSendError("platform down")
    gateway = {"outbound_retry_base_secs": 0.05, "outbound_stale_notice_secs": notice_secs}
    loaded = make_config(home, llm.base_url, gateway=gateway)
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        await channel.submit("c1", "hi", message_id="m1")
        # three tries: at least 0.025 + 0.05 s of backoff, more than 0.05 s after it was written
        await channel.wait_attempts(3)
        channel.fail_forever = None
        [sent] = await channel.wait_sent(1)
        [row] = await rows(gw)
    if noted:
        assert sent.message.text.startswith("echo: hi\n\n(Sent late: this reply was written ")
        assert sent.message.text.endswith("ago and could not be delivered until now.)")
    else:
        assert sent.message.text == "echo: hi"
    assert row["text"] == "echo: hi"  # the note is for the chat, not the record
