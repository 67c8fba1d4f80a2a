from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from tests.fakes.openai_server import FakeOpenAI

# Loopback must never be proxied in tests.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")


@pytest.fixture(autouse=True)
def _plain_tracebacks() -> None:
    """Tests that do not configure logging get structlog's console output with
    plain tracebacks: its default renders every frame's locals with rich, which
    can take long enough on a slow machine to upset timing-sensitive tests."""
    if not structlog.is_configured():
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
                structlog.dev.ConsoleRenderer(
                    colors=False, exception_formatter=structlog.dev.plain_traceback
                ),
            ]
        )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "picobot-home"
    path.mkdir()
    return path


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
