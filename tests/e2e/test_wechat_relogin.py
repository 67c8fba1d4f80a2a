"""WeChat re-login from an expired session, the path every long-running user needs:
getupdates answers −14, the real `picobot channels login wechat` names the
expired token in local_token_list, iLink refuses it (ret −3), the login asks
again without it, and the running gateway resumes polling from its cursor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from channels.wechat.poller import EXPIRED_REASON
from tests.channels.test_wechat_support import eventually, write_credentials
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat
from tests.support import PICOBOT, child_env, running_gateway


async def picobot_login(home: Path, fake: FakeWechat) -> tuple[int, str]:
    config = home / "login-config.json"
    section = {"enabled": True, "base_url": fake.base_url, "qr_poll_interval_secs": 0}
    config.write_text(json.dumps({"channels": {"wechat": section}}))
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "channels",
        "login",
        "wechat",
        "--config",
        str(config),
        env=child_env(home),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_login_after_session_expiry_and_polling_resumes_from_the_cursor(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat(login_script=["wait", "scaned", "confirmed"]) as fake:
        write_credentials(home, fake)
        async with running_gateway(wechat_config(home, llm, fake)) as gw:
            await fake.add_message(ALICE, "before expiry")
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
            stale = fake.token
            fake.expire_session()
            await eventually(lambda: any(EXPIRED_REASON in r for r in gw.readiness()), 10)
            await fake.add_message(ALICE, "while expired")
            polls_before_login = len(fake.updates_requests)

            code, output = await picobot_login(home, fake)
            assert code == 0, output
            assert "Logged in as" in output
            assert fake.qr_token_lists == [
                [stale],
                [],
            ]  # refused with the old token, then asked without

            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
            await eventually(lambda: gw.readiness() == [], 10)
        assert [m.text for m in fake.sent] == ["echo: before expiry", "echo: while expired"]
        # the cursor of the first batch was kept through the expiry: no poll after
        # the login started over from the beginning
        assert "" not in fake.updates_requests[polls_before_login:]
        assert fake.duplicates == []
        assert stale not in output
