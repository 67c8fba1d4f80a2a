"""QR login against the fake iLink server: statuses, refresh limit, redirects, 0600 file."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from channels.wechat import WechatConfig
from channels.wechat.credentials import Credentials, load_credentials, save_credentials
from channels.wechat.login import LoginError, login
from tests.fakes.wechat_server import FakeWechat


def make_config(fake: FakeWechat, tmp_path: Path, **extra: object) -> WechatConfig:
    return WechatConfig.model_validate(
        {
            "enabled": True,
            "base_url": fake.base_url,
            "cred_path": str(tmp_path / "wechat" / "credentials.json"),
            "qr_poll_interval_secs": 0,
            **extra,
        }
    )


class Prompts:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, question: str) -> str:
        self.asked.append(question)
        return self.answers.pop(0)


async def test_scan_then_confirm_saves_credentials_0600(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["wait", "scaned", "confirmed"]) as fake:
        config = make_config(fake, tmp_path)
        out = io.StringIO()
        creds = await login(config, out=out, prompt=Prompts())
        path = tmp_path / "wechat" / "credentials.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        saved = json.loads(path.read_text())
        assert saved["bot_token"] == fake.token
        assert saved["ilink_bot_id"] == fake.bot_id
        assert saved["baseurl"] == fake.base_url
        assert saved["ilink_user_id"] == fake.owner_id
        assert creds.bot_token == fake.token
        text = out.getvalue()
        assert "Scanned" in text
        assert "█" in text
        assert fake.token not in text  # the token never reaches the terminal
        assert fake.token not in repr(creds)
        assert [m for m, _ in fake.qr_requests] == ["POST"]
        assert len(fake.status_requests) == 3
        assert fake.protocol_errors == []


async def test_expired_qr_refreshes_three_times_then_fails(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["expired"]) as fake:
        config = make_config(fake, tmp_path)
        with pytest.raises(LoginError, match="refreshed 3 times"):
            await login(config, out=io.StringIO(), prompt=Prompts())
        assert len(fake.qr_requests) == 4  # the first QR and three refreshes
        # each refresh polls the new QR id
        assert [r["qrcode"] for r in fake.status_requests] == ["qr-1", "qr-2", "qr-3", "qr-4"]
        assert not (tmp_path / "wechat" / "credentials.json").exists()


async def test_expired_once_then_confirmed_on_the_new_qr(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["wait", "expired", "scaned", "confirmed"]) as fake:
        creds = await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        assert creds.bot_token == fake.token
        assert [r["qrcode"] for r in fake.status_requests] == ["qr-1", "qr-1", "qr-2", "qr-2"]


async def test_scaned_but_redirect_switches_host(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["scaned_but_redirect", "scaned", "confirmed"]) as fake:
        await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        hosts = [r["host"] for r in fake.status_requests]
        primary = fake.base_url.removeprefix("http://")
        assert hosts == [primary, fake.alt_host, fake.alt_host]


async def test_need_verifycode_prompts_and_sends_the_code(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["scaned", "need_verifycode", "confirmed"]) as fake:
        prompts = Prompts(" 482913 ")
        await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=prompts)
        assert len(prompts.asked) == 1
        assert [r["verify_code"] for r in fake.status_requests] == ["", "", "482913"]


async def test_verify_code_blocked_gets_a_new_qr(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["verify_code_blocked", "confirmed"]) as fake:
        await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        assert len(fake.qr_requests) == 2


async def test_binded_redirect_keeps_the_saved_login(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["binded_redirect"]) as fake:
        path = tmp_path / "wechat" / "credentials.json"
        old = Credentials("old-token", "bot@im.bot", fake.base_url, "u@im.wechat", expired=True)
        save_credentials(path, old)
        creds = await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        assert creds.bot_token == "old-token"
        reloaded = load_credentials(path)
        assert reloaded is not None
        assert not reloaded.expired


async def test_binded_redirect_without_saved_login_fails_clearly(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["binded_redirect"]) as fake:
        with pytest.raises(LoginError, match="already bound"):
            await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())


async def test_valid_saved_login_is_kept_unless_force_login(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        path = tmp_path / "wechat" / "credentials.json"
        save_credentials(path, Credentials("old-token", "b", fake.base_url, "u"))
        kept = await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        assert kept.bot_token == "old-token"
        assert fake.qr_requests == []
        forced = await login(
            make_config(fake, tmp_path, force_login=True), out=io.StringIO(), prompt=Prompts()
        )
        assert forced.bot_token == fake.token
        assert len(fake.qr_requests) == 1


async def test_qrcode_falls_back_to_get(tmp_path: Path) -> None:
    async with FakeWechat(qr_get_only=True) as fake:
        await login(make_config(fake, tmp_path), out=io.StringIO(), prompt=Prompts())
        assert fake.qr_requests == [("GET", fake.base_url.removeprefix("http://"))]


async def test_login_times_out_clearly(tmp_path: Path) -> None:
    async with FakeWechat(login_script=["wait"]) as fake:
        config = make_config(fake, tmp_path, login_timeout_secs=0.2, qr_poll_interval_secs=0.02)
        with pytest.raises(LoginError, match="timed out"):
            await login(config, out=io.StringIO(), prompt=Prompts())
