"""`send_file` end to end: the agent sends a workspace PNG, and each platform's
fake sees its own upload path (Telegram sendPhoto; Feishu image upload then an
image message; WeChat getuploadurl, CDN upload, image item), each once."""

from __future__ import annotations

from pathlib import Path

from gateway.config.loading import LoadedConfig
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_feishu import feishu_config
from tests.e2e.test_telegram import telegram_config
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.feishu_server import FakeFeishu, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWechat
from tests.support import running_gateway

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDRchart-pixels" * 20


def workspace_png(loaded: LoadedConfig) -> None:
    loaded.workspace.mkdir(parents=True, exist_ok=True)
    (loaded.workspace / "chart.png").write_bytes(PNG)


def script(llm: FakeOpenAI) -> None:
    llm.add_tool_call("send_file", {"path": "chart.png", "caption": "the chart"})
    llm.add_text("I sent you the chart.")


async def test_telegram_gets_the_png_as_a_photo(home: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg:
        loaded = telegram_config(home, llm, tg)
        workspace_png(loaded)
        script(llm)
        async with running_gateway(loaded):
            await tg.add_message("send me the chart", chat_id=42, user_id=42)
            await tg.wait_for(lambda: len(tg.sent_texts) >= 1, timeout=10)
        [photo] = tg.calls_of("sendPhoto")
        assert photo.params.get("_ok")
        assert photo.uploads["photo"] == PNG
        assert tg.calls_of("sendDocument") == []
        assert photo.params["caption"] == "the chart"
        assert tg.sent_texts == ["I sent you the chart."]
        assert "tool_call_id" in str(llm.requests[1])  # the tool answered the model


async def test_feishu_uploads_the_png_once_and_sends_an_image_message(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeFeishu() as fs:
        loaded = feishu_config(home, llm, fs)
        workspace_png(loaded)
        script(llm)
        async with running_gateway(loaded):
            await fs.push_event(message_event("send me the chart"))
            await fs.wait_until(lambda: len(fs.sent) >= 3, 10)
        assert fs.upload_requests == ["image"]
        [(key, (_, data))] = fs.uploads.items()
        assert data == PNG
        kinds = [(s.msg_type, s.content) for s in fs.sent]
        assert ("image", {"image_key": key}) in kinds
        assert [s.text for s in fs.sent if s.msg_type != "image"] == [
            "the chart",
            "I sent you the chart.",
        ]


async def test_wechat_uploads_through_the_cdn_and_sends_an_image_item(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        workspace_png(loaded)
        script(llm)
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "send me the chart")
            await fake.wait_for(lambda: len(fake.sent) >= 3, timeout=10)
        assert len(fake.upload_requests) == 1
        assert len(fake.cdn_uploads) == 1
        assert fake.received_files == [PNG]  # decrypted with the key the item named
        assert [m.text for m in fake.sent] == ["the chart", "[image]", "I sent you the chart."]
        assert fake.protocol_errors == []
