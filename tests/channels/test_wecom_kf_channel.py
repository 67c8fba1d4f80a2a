"""The WeCom KF channel against the fake platform: callbacks, sync_msg pages, sending."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels.base import PermanentSendError, RateLimited
from channels.wecom_kf import WecomKfChannel, WecomKfConfig
from channels.wecom_kf.allowance import CUT_MARKER
from channels.wecom_kf.sync import cursor_key
from gateway.bus import MediaKind, OutboundMessage
from tests.channel_runtime import channel_runtime
from tests.fakes.wecom_kf_server import CORP_ID, OPEN_KFID, FakeWecomKf
from tests.support import wait_until

PATH = "/webhooks/wecom_kf"
ALICE = "wmAliceExternal"


@pytest.fixture
async def fake() -> AsyncIterator[FakeWecomKf]:
    async with FakeWecomKf(page_size=2) as server:
        yield server


def make_channel(fake: FakeWecomKf, **extra: Any) -> WecomKfChannel:
    return WecomKfChannel(WecomKfConfig(**fake.settings(**extra)))


def reply(text: str, outbox_id: int = 1, user: str = ALICE) -> OutboundMessage:
    """An outbox row's message: its key follows the row id, as the row stores it."""
    return OutboundMessage(
        "wecom_kf",
        f"{OPEN_KFID}:{user}",
        text,
        outbox_id=outbox_id,
        idempotency_key=f"pb{outbox_id}",
    )


async def test_url_check_answers_the_plaintext_and_refuses_forgeries(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        url = rt.base_url + PATH
        assert await fake.verify_url(url, "1616140317555161061") == (200, "1616140317555161061")
        status, _ = await fake.verify_url(url, "x", bad_signature=True)
        assert status == 401
        status, _ = await fake.verify_url(url, "x", receive_id="wwOTHER")
        assert status == 400
        status, _ = await fake.verify_url(url, "x", encrypt="bm90IGEgY2lwaGVydGV4dA==")
        assert status == 400


async def test_a_callback_pulls_every_page_and_records_customer_messages_only(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    first = fake.add_message(ALICE, "one")
    fake.add_event("enter_session", ALICE, welcome_code="W1")
    fake.add_message(ALICE, "from a human servicer", origin=5)
    second = fake.add_message(ALICE, "two")
    fake.add_message("wmBob", "three", msgtype="text")
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        got = await rt.wait_for_messages(3)
        await fake.wait_for(lambda: len(fake.sync_requests) >= 3)
        assert [m.text for m in got] == ["one", "two", "three"]
        assert [m.message_id for m in got[:2]] == [first, second]
        assert got[0].chat_id == f"{OPEN_KFID}:{ALICE}"
        assert got[0].sender_id == ALICE
        assert got[0].addressed
        # the callback again (WeCom retries): a pull from the stored cursor, nothing new
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        await fake.wait_for(lambda: len(fake.sync_requests) >= 4)
        assert len(rt.received) == 3
    # the callback's token went with the pull; three pages of two, looped on has_more
    assert [r["cursor"] for r in fake.sync_requests] == ["", "c2", "c4", "c5"]
    assert all(
        r["token"].startswith("ENC") and r["open_kfid"] == OPEN_KFID for r in fake.sync_requests
    )
    assert fake.protocol_errors == []


async def test_forged_callbacks_are_refused_and_record_nothing(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message(ALICE, "hello")
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        url = rt.base_url + PATH
        assert (await fake.notify(url, bad_signature=True))[0] == 401
        assert (await fake.notify(url, bad_ciphertext=True))[0] == 400
        assert (await fake.notify(url, receive_id="wwOTHER"))[0] == 400
        assert fake.sync_requests == []
        assert rt.received == []
        assert await fake.notify(url) == (200, "success")  # nothing lost: a good one pulls it
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "hello"


async def test_a_callback_of_another_event_type_is_acknowledged_and_ignored(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    """The callback URL also receives the corp's other events, encrypted the
    same way: 200 "success" (WeCom stops retrying), no pull, nothing at error
    level (it was a TypeError, a 500 and a traceback on every retry)."""
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        with capture_logs() as logs:
            status = await fake.notify(rt.base_url + PATH, event="change_external_contact")
        assert status == (200, "success")
        assert rt.received == []
        assert fake.sync_requests == []
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []
    [ignored] = [e for e in logs if e["event"] == "wecom_kf callback: acknowledged and ignored"]
    assert ignored["kind"] == "change_external_contact"


async def test_media_is_downloaded_with_its_name(fake: FakeWecomKf, tmp_path: Path) -> None:
    fake.add_media("MEDIA1", b"%PDF-1.4 fake", "application/pdf", "report.pdf")
    fake.add_message(ALICE, msgtype="file", body={"media_id": "MEDIA1"})
    fake.add_message(ALICE, msgtype="image", body={"media_id": "GONE"})
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        await fake.notify(rt.base_url + PATH)
        file_msg, image_msg = await rt.wait_for_messages(2)
    [ref] = file_msg.media
    assert (ref.kind, ref.name, ref.mime_type) == (MediaKind.FILE, "report.pdf", "application/pdf")
    assert Path(ref.path).read_bytes() == b"%PDF-1.4 fake"
    assert Path(ref.path).parent == tmp_path / "wecom_kf"
    assert image_msg.media == ()
    assert image_msg.text == "[image could not be downloaded]"


async def test_a_file_streaming_past_the_cap_is_left_out_with_a_note(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    """media/get streams 50 MB with no length: the read stops past the 64 KB
    cap, so the server got to write a few socket buffers, not 50 MB."""
    endless = fake.add_streamed_media("ENDLESS", 50_000_000)
    fake.add_message(ALICE, msgtype="file", body={"media_id": "ENDLESS"})
    async with channel_runtime(make_channel(fake, max_media_bytes=65536), tmp_path) as rt:
        await fake.notify(rt.base_url + PATH)
        [msg] = await rt.wait_for_messages(1)
        await asyncio.wait_for(endless.done.wait(), 10)
    assert msg.media == ()
    assert msg.text == "[file omitted: larger than 65536 bytes]"
    assert endless.sent < 10_000_000, endless.sent
    assert not list((tmp_path / "wecom_kf").glob("*"))


@pytest.mark.parametrize("skew", [-600, 600])
async def test_a_signed_callback_outside_the_replay_window_is_refused(
    fake: FakeWecomKf, tmp_path: Path, skew: int
) -> None:
    """Signed correctly, but 10 minutes old (a captured callback replayed) or
    10 minutes ahead: refused, nothing pulled; a fresh one goes through."""
    fake.add_message(ALICE, "hello")
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        url = rt.base_url + PATH
        then = time.time() + skew
        assert await fake.notify(url, timestamp=then) == (
            403,
            "timestamp outside the replay window",
        )
        assert (await fake.verify_url(url, "42", timestamp=then))[0] == 403
        assert fake.sync_requests == []
        assert await fake.notify(url, timestamp=time.time() - 240) == (200, "success")
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "hello"


async def test_start_pulls_the_known_accounts_from_their_cursor(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message(ALICE, "answered before")
    fake.add_message(ALICE, "arrived while down")
    channel = make_channel(fake, open_kfids=[OPEN_KFID])
    runtime_state = {cursor_key(OPEN_KFID): "c1"}
    async with channel_runtime(channel, tmp_path, state=runtime_state) as rt:
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "arrived while down"
    assert "token" not in fake.sync_requests[0]  # no callback token: pulled without one


async def test_sending_splits_by_bytes_and_refreshes_an_expired_token(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message(ALICE, "hi")
    channel = make_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        await channel.send(reply("first"))
        fake.expire_tokens()
        result = await channel.send(reply("长" * 1000, outbox_id=2))  # 3000 bytes: two parts
    assert fake.sent_texts == ["first", "长" * 682, "长" * 318]
    assert len(result.platform_message_ids) == 2
    assert fake.token_requests == 2  # once at first use, once after the 42001
    assert [m.msgid for m in fake.sent] == ["pb1_0", "pb2_0", "pb2_1"]
    assert rt.secrets
    assert all(s.startswith("AT") for s in rt.secrets)
    assert fake.protocol_errors == []


async def test_send_refusals_become_typed_errors(fake: FakeWecomKf, tmp_path: Path) -> None:
    fake.add_message(ALICE, "hi", send_time=0)  # the customer wrote long ago: window closed
    channel = make_channel(fake)
    async with channel_runtime(channel, tmp_path):
        with pytest.raises(PermanentSendError, match="48 h"):
            await channel.send(reply("too late"))
        fake.fail_next("kf/send_msg", 45009)
        with pytest.raises(RateLimited):
            await channel.send(reply("throttled", outbox_id=2))
        with pytest.raises(PermanentSendError):
            await channel.send(OutboundMessage("wecom_kf", "no-colon", "x"))
    assert fake.sent == []


async def test_a_customer_gets_at_most_five_messages_per_message_of_theirs(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message(ALICE, "hi")
    channel = make_channel(fake)
    async with channel_runtime(channel, tmp_path):
        for n in range(5):
            await channel.send(reply(f"part {n}", outbox_id=n + 1))
        with pytest.raises(PermanentSendError, match="95001"):
            await channel.send(reply("sixth", outbox_id=6))
    assert len(fake.sent) == 5
    assert fake.refused_sends == [("sixth", 95001)]


def test_config_requires_the_credentials_when_enabled() -> None:
    with pytest.raises(ValueError, match="secret, token, encoding_aes_key"):
        WecomKfConfig(enabled=True, corp_id=CORP_ID)
    with pytest.raises(ValueError, match="43 characters"):
        WecomKfConfig(
            enabled=True, corp_id=CORP_ID, secret="s", token="t", encoding_aes_key="short"
        )
    assert WecomKfConfig().path == "/webhooks/wecom_kf"


async def test_a_failed_pull_is_retried_and_an_unreadable_item_does_not_stall(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message("", "no external_userid: unreadable")
    fake.add_message(ALICE, "fine")
    fake.fail_next("kf/sync_msg", -1)  # system busy, once
    async with channel_runtime(make_channel(fake), tmp_path) as rt:
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "fine"
    assert [r["cursor"] for r in fake.sync_requests] == ["", ""]  # refused, then again


async def test_the_first_pull_skips_the_backlog_and_a_restart_answers_nothing_again(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    """WeCom's stream begins with the last 3 days: at an account's first pull
    a 2-day-old backlog is skipped (staff may have answered it), a message
    sent after the start is answered once, and a restart answers nothing again."""
    two_days_ago = time.time() - 2 * 86400
    old = [fake.add_message(ALICE, f"old {n}", send_time=two_days_ago) for n in range(3)]
    state: dict[str, str] = {}
    channel = make_channel(fake, backlog_secs=0)
    async with channel_runtime(channel, tmp_path) as rt:
        with capture_logs() as logs:
            assert await fake.notify(rt.base_url + PATH) == (200, "success")
            values = rt.state.values
            await wait_until(lambda: values.get(f"backlog_before:{OPEN_KFID}") == "drained")
            drained = values[cursor_key(OPEN_KFID)]
            new = fake.add_message(ALICE, "new")
            assert await fake.notify(rt.base_url + PATH) == (200, "success")
            [msg] = await rt.wait_for_messages(1)
            await wait_until(lambda: values[cursor_key(OPEN_KFID)] != drained)
        state.update(rt.state.values)
    assert (msg.message_id, msg.text) == (new, "new")
    [skipped] = [e for e in logs if e["event"].startswith("wecom_kf: first pull")]
    assert skipped["skipped"] == len(old)

    requests = len(fake.sync_requests)
    async with channel_runtime(make_channel(fake, open_kfids=[OPEN_KFID]), tmp_path, state) as rt:
        await fake.wait_for(lambda: len(fake.sync_requests) > requests)  # start pulls
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        await fake.wait_for(lambda: len(fake.sync_requests) > requests + 1)
        assert rt.received == []


async def test_backlog_secs_keeps_the_recent_part_of_the_backlog(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    fake.add_message(ALICE, "a day ago", send_time=time.time() - 86400)
    recent = fake.add_message(ALICE, "ten minutes ago", send_time=time.time() - 600)
    async with channel_runtime(make_channel(fake, backlog_secs=3600), tmp_path) as rt:
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        [msg] = await rt.wait_for_messages(1)
        await fake.wait_for(lambda: len(fake.sync_requests) >= 1)
    assert msg.message_id == recent


async def test_a_reply_past_the_allowance_is_cut_with_a_marker_not_lost(
    fake: FakeWecomKf, tmp_path: Path
) -> None:
    """One customer message allows 5 replies: after a 4-part reply, a 3-part
    one goes out as 1 part ending with the marker (no refusal, nothing silently
    missing); the customer's next message allows 5 again."""
    fake.add_message(ALICE, "hi")
    channel = make_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        await rt.wait_for_messages(1)
        await channel.send(reply("一" * 2700, outbox_id=1))  # 8,100 bytes: 4 parts
        cut = await channel.send(reply("二" * 2000, outbox_id=2))  # 3 parts, 1 left
        assert len(cut.platform_message_ids) == 1
        last = fake.sent_texts[-1]
        assert last.endswith(CUT_MARKER)
        assert last.startswith("二")
        assert len(last.encode()) <= 2048
        assert fake.refused_sends == []

        fake.add_message(ALICE, "more please")
        assert await fake.notify(rt.base_url + PATH) == (200, "success")
        await rt.wait_for_messages(2)
        await channel.send(reply("三" * 1000, outbox_id=3))  # 2 parts, both sent
    assert len(fake.sent) == 7
    assert fake.sent_texts[-2:] == ["三" * 682, "三" * 318]
    assert fake.refused_sends == []
