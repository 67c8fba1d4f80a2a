"""`picobot doctor` on the bash sandbox and an unauthenticated Feishu webhook."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.cli.test_doctor import Setup, base_config, line_of


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


async def test_missing_bwrap_is_a_warning_with_the_install_hint(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(setup.tmp))  # no bwrap on it
    setup.write(base_config())
    _, text = await setup.run()
    line = line_of(text, "bash sandbox")
    assert "bwrap not found" in line
    assert "apt-get install bubblewrap" in text


async def test_sandbox_bwrap_without_bwrap_is_a_problem(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(setup.tmp))
    setup.write(base_config(tools={"bash": {"sandbox": "bwrap"}}))
    code, text = await setup.run()
    assert code == 1
    assert "refuses to start" in line_of(text, "bash sandbox")


async def test_unauthenticated_feishu_webhook_is_a_problem(setup: Setup) -> None:
    feishu = {"enabled": True, "app_id": "cli_x", "app_secret": "s", "mode": "webhook"}
    setup.write(base_config(channels={"feishu": feishu}))
    code, text = await setup.run()
    assert code == 1
    assert "forged events pass" in text
