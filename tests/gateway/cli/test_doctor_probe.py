"""`picobot doctor --probe`: one call per provider and channel API, against the
fake servers, with what each answer means."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.gateway.cli.test_doctor import API_KEY, Setup, base_config, line_of


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        server.api_key = API_KEY
        yield server


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_probe_accepts_a_good_key(setup: Setup, fake_openai: FakeOpenAI) -> None:
    provider = {"type": "openai", "api_key": "${OPENAI_API_KEY}", "base_url": fake_openai.base_url}
    setup.write(base_config(providers={"default": provider}))
    code, text = await setup.run(probe=True)
    assert code == 0, text
    assert "api_key accepted" in line_of(text, "probe provider default")


async def test_probe_reports_a_rejected_key(setup: Setup, fake_openai: FakeOpenAI) -> None:
    provider = {
        "type": "openai",
        "api_key": "sk-wrong-key-000000000",
        "base_url": fake_openai.base_url,
    }
    setup.write(base_config(providers={"default": provider}))
    code, text = await setup.run(probe=True)
    assert code == 1
    probe = line_of(text, "probe provider default")
    assert probe.startswith("problem")
    assert "rejected the api_key (HTTP 401)" in probe
    assert "sk-wrong-key-000000000" not in text


async def test_probe_reports_an_unreachable_provider(setup: Setup) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    setup.write(
        base_config(providers={"default": {"api_key": "${OPENAI_API_KEY}", "base_url": base}})
    )
    code, text = await setup.run(probe=True)
    assert code == 1
    assert "cannot reach" in line_of(text, "probe provider default")


async def anthropic_models(request: web.Request) -> web.Response:
    if request.headers.get("x-api-key") != API_KEY or not request.headers.get("anthropic-version"):
        error = {"type": "authentication_error", "message": "invalid x-api-key"}
        return web.json_response({"type": "error", "error": error}, status=401)
    return web.json_response({"data": [{"id": "claude-x", "type": "model"}], "has_more": False})


async def test_probe_anthropic(setup: Setup) -> None:
    app = web.Application()
    app.router.add_get("/v1/models", anthropic_models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        provider = {"type": "anthropic", "api_key": "${OPENAI_API_KEY}", "base_url": base}
        setup.write(base_config(providers={"default": provider}))
        code, text = await setup.run(probe=True)
        assert code == 0, text
        assert "api_key accepted" in line_of(text, "probe provider default")

        setup.env["OPENAI_API_KEY"] = "bad-anthropic-key"
        code, text = await setup.run(probe=True)
        assert code == 1
        assert "HTTP 401" in line_of(text, "probe provider default")
    finally:
        await runner.cleanup()


async def test_probe_telegram_token(setup: Setup, fake_openai: FakeOpenAI) -> None:
    provider = {"api_key": "${OPENAI_API_KEY}", "base_url": fake_openai.base_url}
    providers = {"default": provider}  # every probe stays on loopback
    async with FakeTelegram() as tg:
        telegram = {"enabled": True, "token": TOKEN, "api_base": tg.api_base}
        setup.write(base_config(providers=providers, channels={"telegram": telegram}))
        code, text = await setup.run(probe=True)
        assert code == 0, text
        assert "the token belongs to @" in line_of(text, "probe telegram")
        assert any(call.method == "getMe" for call in tg.calls)

        telegram["token"] = "999:someone-elses-token"
        setup.write(base_config(providers=providers, channels={"telegram": telegram}))
        code, text = await setup.run(probe=True)
        assert code == 1
        assert "rejected (HTTP 401)" in line_of(text, "probe telegram")
        assert "someone-elses-token" not in text


class FakeOpenPlatform:
    """Feishu's tenant-token endpoint and an iLink host: just what doctor calls."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.app.router.add_post(
            "/open-apis/auth/v3/tenant_access_token/internal", self.tenant_token
        )
        self.runner = web.AppRunner(self.app, access_log=None)
        self.base = ""

    async def tenant_token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body == {"app_id": "cli_doctor", "app_secret": "feishu-secret-0123456789"}:
            return web.json_response(
                {"code": 0, "msg": "ok", "tenant_access_token": "t-abc", "expire": 7200}
            )
        return web.json_response({"code": 10014, "msg": "app secret invalid"})

    async def __aenter__(self) -> FakeOpenPlatform:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def test_probe_feishu_credentials(setup: Setup, fake_openai: FakeOpenAI) -> None:
    providers = {"default": {"api_key": "${OPENAI_API_KEY}", "base_url": fake_openai.base_url}}
    async with FakeOpenPlatform() as platform:
        feishu = {
            "enabled": True,
            "app_id": "cli_doctor",
            "app_secret": "feishu-secret-0123456789",
            "domain": platform.base,
        }
        setup.write(base_config(providers=providers, channels={"feishu": feishu}))
        code, text = await setup.run(probe=True)
        assert code == 0, text
        assert "issued a tenant token" in line_of(text, "probe feishu")

        feishu["app_secret"] = "feishu-wrong-secret-000"
        setup.write(base_config(providers=providers, channels={"feishu": feishu}))
        code, text = await setup.run(probe=True)
        assert code == 1
        assert "credentials rejected (code 10014" in line_of(text, "probe feishu")
        assert "feishu-wrong-secret-000" not in text


async def test_probe_wechat_reachability(setup: Setup, fake_openai: FakeOpenAI) -> None:
    providers = {"default": {"api_key": "${OPENAI_API_KEY}", "base_url": fake_openai.base_url}}
    creds = setup.home / "wechat" / "credentials.json"
    creds.parent.mkdir()
    creds.write_text(json.dumps({"bot_token": "ilink-secret-token"}))
    async with FakeOpenPlatform() as platform:
        wechat = {"enabled": True, "base_url": platform.base}
        setup.write(base_config(providers=providers, channels={"wechat": wechat}))
        code, text = await setup.run(probe=True)
    assert code == 0, text
    assert "is reachable (HTTP 404)" in line_of(text, "probe wechat")

    code, text = await setup.run(probe=True)  # the host is gone now
    assert code == 1
    assert "cannot reach" in line_of(text, "probe wechat")


async def test_probe_wecom_kf_credentials(setup: Setup, fake_openai: FakeOpenAI) -> None:
    from tests.fakes.wecom_kf_server import FakeWecomKf

    providers = {"default": {"api_key": "${OPENAI_API_KEY}", "base_url": fake_openai.base_url}}
    async with FakeWecomKf() as fake:
        section = fake.settings()
        setup.write(base_config(providers=providers, channels={"wecom_kf": section}))
        code, text = await setup.run(probe=True)
        assert code == 0, text
        assert "present" in line_of(text, "channel wecom_kf")
        assert "issued an access token" in line_of(text, "probe wecom_kf")

        section["secret"] = "wecom-wrong-secret-000"
        setup.write(base_config(providers=providers, channels={"wecom_kf": section}))
        code, text = await setup.run(probe=True)
    assert code == 1
    assert "credentials rejected (errcode 40001" in line_of(text, "probe wecom_kf")
    assert "wecom-wrong-secret-000" not in text
