"""`send_file` across a SIGKILL between the upload and the send: after the
restart each platform sees one upload and one file message (Telegram's
sendPhoto is one call, so there the kill lands before it)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_send_file import PNG, script
from tests.e2e.test_wechat import ALICE, wechat_section
from tests.fakes.feishu_server import FakeFeishu, config_dict, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWechat
from tests.support import GatewayProcess, child_env, spawn_gateway

pytestmark = pytest.mark.slow


def _config(home: Path, llm: FakeOpenAI, channels: dict[str, Any]) -> dict[str, Any]:
    (home / "workspace").mkdir(parents=True, exist_ok=True)
    (home / "workspace" / "chart.png").write_bytes(PNG)
    return {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 5, "outbound_retry_base_secs": 0.05},
        "logging": {"format": "json"},
        "channels": {"websocket": {"enabled": False}, **channels},
    }


async def _kill(gw: GatewayProcess) -> None:
    assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL


async def test_feishu_image_is_uploaded_and_sent_once_across_a_sigkill(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeFeishu() as fs:
        config = _config(home, llm, {"feishu": config_dict(fs.base_url)})
        script(llm)
        env = child_env(home)
        fs.swallow_media_sends = True
        gw = await spawn_gateway(config, home, env)
        await fs.wait_until(lambda: bool(fs._conns), 20)
        await fs.push_event(message_event("send me the chart"))
        await fs.wait_until(lambda: bool(fs.swallowed), 20)  # uploaded; the send is in flight
        await gw.wait_event("turn_done", 20)
        await _kill(gw)
        fs.swallow_media_sends = False
        gw = await spawn_gateway(config, home, env)
        try:
            await fs.wait_until(lambda: any(s.msg_type == "image" for s in fs.sent), 20)
            await fs.wait_until(lambda: any(s.text == "I sent you the chart." for s in fs.sent), 20)
        finally:
            assert await gw.stop() == 0
    assert fs.upload_requests == ["image"]  # not uploaded again after the restart
    images = [s for s in fs.sent if s.msg_type == "image"]
    assert len(images) == 1
    assert images[0].uuid == fs.swallowed[0]  # the same send, not a new one
    assert [s.text for s in fs.sent if s.msg_type != "image"].count("the chart") == 1


async def test_wechat_image_is_uploaded_and_sent_once_across_a_sigkill(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        config = _config(home, llm, {"wechat": wechat_section(fake)})
        script(llm)
        env = child_env(home)
        fake.swallow_media_sends = True
        gw = await spawn_gateway(config, home, env)
        await fake.add_message(ALICE, "send me the chart")
        await fake.wait_for(lambda: bool(fake.swallowed), 20)
        await gw.wait_event("turn_done", 20)
        await _kill(gw)
        fake.swallow_media_sends = False
        gw = await spawn_gateway(config, home, env)
        try:
            await fake.wait_for(
                lambda: "I sent you the chart." in [m.text for m in fake.sent], timeout=20
            )
        finally:
            assert await gw.stop() == 0
    assert len(fake.upload_requests) == 1
    assert len(fake.cdn_uploads) == 1
    assert fake.received_files == [PNG]
    assert [m.text for m in fake.sent] == ["the chart", "[image]", "I sent you the chart."]
    assert [m.client_id for m in fake.sent if m.text == "[image]"] == fake.swallowed
    assert fake.protocol_errors == []


async def test_telegram_photo_is_sent_once_across_a_sigkill(home: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg:
        config = _config(home, llm, {"telegram": tg.settings()})
        script(llm)
        env = child_env(home)
        tg.start_outage("sendPhoto", 502)  # the kill lands before the photo is taken
        gw = await spawn_gateway(config, home, env)
        await tg.add_message("send me the chart", chat_id=42, user_id=42)
        await tg.wait_for(lambda: bool(tg.calls_of("sendPhoto")), timeout=20)
        await gw.wait_event("turn_done", 20)
        await _kill(gw)
        tg.end_outage("sendPhoto")
        gw = await spawn_gateway(config, home, env)
        try:
            await tg.wait_for(lambda: len(tg.sent_texts) >= 1, timeout=20)
        finally:
            assert await gw.stop() == 0
    delivered = [c for c in tg.calls_of("sendPhoto") if c.params.get("_ok")]
    assert len(delivered) == 1
    assert delivered[0].uploads["photo"] == PNG
    assert tg.sent_texts == ["I sent you the chart."]
