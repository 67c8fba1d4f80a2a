"""Start-up says when the bash tool is unsandboxed or a Feishu webhook is unauthenticated."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_feishu import feishu_config
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway


async def test_missing_bwrap_is_logged_at_start(
    home: Path,
    llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PATH", str(home))  # no bwrap there
    async with running_gateway(make_config(home, llm.base_url)):
        pass
    out = capsys.readouterr().out
    assert "bash_tool_unsandboxed" in out
    assert "apt-get install bubblewrap" in out


async def test_unauthenticated_feishu_webhook_is_logged_at_start(
    home: Path, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    async with (
        FakeFeishu() as fs,
        running_gateway(feishu_config(home, llm, fs, mode="webhook")),
    ):
        pass
    assert "feishu webhook unauthenticated" in capsys.readouterr().out
