"""Shared fixtures for the built-in tool tests: a workspace and a ToolContext."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.tools.base import ToolContext, ToolSettings

MakeCtx = Callable[..., ToolContext]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def make_ctx(workspace: Path) -> MakeCtx:
    """Build a ToolContext whose settings default to the test workspace."""

    def make(**overrides: object) -> ToolContext:
        overrides.setdefault("workspace", workspace)
        settings = ToolSettings(**overrides)  # type: ignore[arg-type]
        return ToolContext(
            session_id="s1", channel="test", chat_id="c1", sender_id="u1", settings=settings
        )

    return make


@pytest.fixture
def ctx(make_ctx: MakeCtx) -> ToolContext:
    return make_ctx()
